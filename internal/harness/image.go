package harness

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/opencontainers/go-digest"
	specs "github.com/opencontainers/image-spec/specs-go"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// BusyboxPath is the static busybox binary the images are built from.
const BusyboxPath = "/bin/busybox"

// epoch is the modification time of every layer entry, so builds are reproducible.
var epoch = time.Unix(0, 0)

// Image is an OCI image held in memory: its manifest, its config and its
// layer blobs, each addressed by digest.
type Image struct {
	Manifest       []byte
	ManifestDigest digest.Digest
	Config         []byte
	ConfigDigest   digest.Digest
	Layers         map[digest.Digest][]byte
}

// Blob returns the config or layer blob with the given digest.
func (img *Image) Blob(d digest.Digest) ([]byte, bool) {
	if d == img.ConfigDigest {
		return img.Config, true
	}
	b, ok := img.Layers[d]
	return b, ok
}

// BuildBusybox builds a single-layer image holding BusyboxPath, every applet
// as a hard link to it, and a minimal /etc; cmd is the image's default command.
func BuildBusybox(cmd []string) (*Image, error) {
	return BuildImage(ImageOptions{Cmd: cmd})
}

// ImageOptions describe an image built by BuildImage.
type ImageOptions struct {
	// Busybox is the static busybox binary; default BusyboxPath.
	Busybox string
	// Entrypoint and Cmd are the image's entrypoint (none by default) and
	// default command (its arguments when there is an entrypoint).
	Entrypoint []string
	Cmd        []string
	// User is the image config's User ("1002", "www-data:1004"); default root.
	User string
	// Files are added to the layer after the defaults, replacing a default
	// of the same name (etc/passwd, etc/group).
	Files []File
}

// File is a regular file of an image layer.
type File struct {
	Name string // relative, e.g. "etc/passwd"
	Mode int64
	Data []byte
}

// BuildImage builds a single-layer image holding a static busybox, every
// applet as a hard link to it, a minimal /etc and o.Files.
func BuildImage(o ImageOptions) (*Image, error) {
	if o.Busybox == "" {
		o.Busybox = BusyboxPath
	}
	applets, err := busyboxApplets(o.Busybox)
	if err != nil {
		return nil, err
	}
	bin, err := os.ReadFile(o.Busybox)
	if err != nil {
		return nil, fmt.Errorf("read busybox: %w", err)
	}
	tarball, err := busyboxTar(bin, applets, o.Files...)
	if err != nil {
		return nil, fmt.Errorf("build busybox layer: %w", err)
	}
	layer, err := gzipBytes(tarball)
	if err != nil {
		return nil, fmt.Errorf("compress busybox layer: %w", err)
	}
	return assembleImage(layer, digest.FromBytes(tarball), ocispec.ImageConfig{Env: []string{"PATH=/bin"}, Entrypoint: o.Entrypoint, Cmd: o.Cmd, User: o.User})
}

// busyboxApplets lists the applet names of the busybox at path.
func busyboxApplets(path string) ([]string, error) {
	out, err := exec.Command(path, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("list busybox applets of %s: %w", path, err)
	}
	var applets []string
	for _, name := range strings.Fields(string(out)) {
		if name != "busybox" && !strings.Contains(name, "/") {
			applets = append(applets, name)
		}
	}
	if len(applets) == 0 {
		return nil, fmt.Errorf("busybox %s lists no applets", path)
	}
	return applets, nil
}

// busyboxTar writes the uncompressed layer. Applets are hard links, not
// symlinks: runc masks paths with bind mounts, which follow symlinks.
func busyboxTar(bin []byte, applets []string, extra ...File) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, dir := range []string{"bin", "dev", "etc", "proc", "root", "sys", "tmp"} {
		mode := int64(0o755)
		if dir == "tmp" {
			mode = 0o1777
		}
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: mode, ModTime: epoch}); err != nil {
			return nil, fmt.Errorf("write dir %s: %w", dir, err)
		}
	}
	files := []File{
		{"bin/busybox", 0o755, bin},
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/bin/sh\n")},
		{"etc/group", 0o644, []byte("root:x:0:\n")},
	}
	for _, e := range extra {
		i := slices.IndexFunc(files, func(f File) bool { return f.Name == e.Name })
		if i < 0 {
			files = append(files, e)
		} else {
			files[i] = e
		}
	}
	dirs := map[string]bool{"bin": true, "dev": true, "etc": true, "proc": true, "root": true, "sys": true, "tmp": true}
	for _, f := range files {
		// Parents first (e.g. usr/ and usr/sbin/ for usr/sbin/nginx).
		parts := strings.Split(path.Dir(f.Name), "/")
		for i := range parts {
			d := strings.Join(parts[:i+1], "/")
			if d == "." || dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: epoch}); err != nil {
				return nil, fmt.Errorf("write dir %s: %w", d, err)
			}
		}
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.Name, Mode: f.Mode, Size: int64(len(f.Data)), ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("write header %s: %w", f.Name, err)
		}
		if _, err := tw.Write(f.Data); err != nil {
			return nil, fmt.Errorf("write %s: %w", f.Name, err)
		}
	}
	for _, a := range applets {
		hdr := &tar.Header{Typeflag: tar.TypeLink, Name: "bin/" + a, Linkname: "bin/busybox", Mode: 0o755, ModTime: epoch}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, fmt.Errorf("write link %s: %w", a, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("close tar: %w", err)
	}
	return buf.Bytes(), nil
}

func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := io.Copy(zw, bytes.NewReader(b)); err != nil {
		return nil, fmt.Errorf("gzip: %w", err)
	}
	if err := zw.Close(); err != nil {
		return nil, fmt.Errorf("close gzip: %w", err)
	}
	return buf.Bytes(), nil
}

// assembleImage wraps one gzip layer into an image with config cfg.
func assembleImage(layer []byte, diffID digest.Digest, cfg ocispec.ImageConfig) (*Image, error) {
	config, err := json.Marshal(ocispec.Image{
		Platform: ocispec.Platform{OS: "linux", Architecture: runtime.GOARCH},
		Config:   cfg,
		RootFS:   ocispec.RootFS{Type: "layers", DiffIDs: []digest.Digest{diffID}},
	})
	if err != nil {
		return nil, fmt.Errorf("marshal image config: %w", err)
	}
	layerDigest := digest.FromBytes(layer)
	manifest, err := json.Marshal(ocispec.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: ocispec.MediaTypeImageManifest,
		Config: ocispec.Descriptor{
			MediaType: ocispec.MediaTypeImageConfig,
			Digest:    digest.FromBytes(config),
			Size:      int64(len(config)),
		},
		Layers: []ocispec.Descriptor{{
			MediaType: ocispec.MediaTypeImageLayerGzip,
			Digest:    layerDigest,
			Size:      int64(len(layer)),
		}},
	})
	if err != nil {
		return nil, fmt.Errorf("marshal image manifest: %w", err)
	}
	return &Image{
		Manifest:       manifest,
		ManifestDigest: digest.FromBytes(manifest),
		Config:         config,
		ConfigDigest:   digest.FromBytes(config),
		Layers:         map[digest.Digest][]byte{layerDigest: layer},
	}, nil
}
