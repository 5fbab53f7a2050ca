// Command nstarget-image builds the cluster install's OCI image (make image;
// deploy/, docs/cluster-install.md) with go-containerregistry, without a
// container engine:
//
//	nstarget-image --out DIR --version v1.2.3 --revision SHA --epoch SOURCE_DATE_EPOCH \
//	    --unit systemd/cri-nstarget.service.in \
//	    --arch amd64=bin/image/amd64 [--arch arm64=bin/image/arm64]
//
// Each --arch directory holds that architecture's static cri-nstarget and
// cri-nstarget-install. The image of each architecture has two layers:
//
//  1. /usr/local/bin/cri-nstarget-install and
//     /usr/local/share/cri-nstarget/cri-nstarget.service.in
//  2. /usr/local/bin/cri-nstarget
//
// (the installer's layer first: a new shim alone changes the second), with
// cri-nstarget-install as its entrypoint and "install" as its command. DIR
// gets:
//
//	oci/                                              an OCI image layout: the index of every
//	                                                  architecture, named VERSION
//	cri-nstarget-image-VERSION.oci.tar                the same layout as one tar (skopeo's
//	                                                  oci-archive:, ctr images import)
//	cri-nstarget-image-VERSION-linux-ARCH.tar         one architecture as a `docker save` tarball
//	                                                  (docker load, podman load, ctr images import)
//	digest                                            the index's digest (sha256:...), which
//	                                                  `skopeo copy --all` keeps: make release writes
//	                                                  it into its deploy/ and Helm chart
//
// Every date in them is --epoch (the commit's), every tar entry is in name
// order with uid and gid 0: the same inputs give the same bytes.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// file is one entry of a layer.
type file struct {
	path string // in the image, absolute
	src  string // on this machine
	mode int64
}

type archFlag map[string]string

func (a archFlag) String() string { return fmt.Sprint(map[string]string(a)) }
func (a archFlag) Set(v string) error {
	arch, dir, ok := strings.Cut(v, "=")
	if !ok || arch == "" || dir == "" {
		return fmt.Errorf("%q: want ARCH=DIR", v)
	}
	a[arch] = dir
	return nil
}

type options struct {
	out, version, revision, repo, source, unit string
	epoch                                      int64
	arches                                     archFlag
}

func main() {
	o := options{arches: archFlag{}}
	flag.StringVar(&o.out, "out", "", "output directory")
	flag.StringVar(&o.version, "version", "", "the image's version (its tag)")
	flag.StringVar(&o.revision, "revision", "", "the commit")
	flag.StringVar(&o.repo, "repo", "cri-nstarget", "the repository named in the docker tarballs")
	flag.StringVar(&o.source, "source", "https://github.com/cri-nstarget/cri-nstarget", "org.opencontainers.image.source")
	flag.StringVar(&o.unit, "unit", "systemd/cri-nstarget.service.in", "the shim's unit template")
	flag.Int64Var(&o.epoch, "epoch", -1, "every date in the image, in seconds since 1970 (SOURCE_DATE_EPOCH)")
	flag.Var(o.arches, "arch", "ARCH=DIR: the binaries of one architecture (repeat)")
	flag.Parse()
	if err := build(o); err != nil {
		fmt.Fprintln(os.Stderr, "nstarget-image:", err)
		os.Exit(1)
	}
}

func build(o options) error {
	if o.out == "" || o.version == "" || o.epoch < 0 || len(o.arches) == 0 {
		return errors.New("--out, --version, --epoch and at least one --arch are required")
	}
	when := time.Unix(o.epoch, 0).UTC()
	if err := os.RemoveAll(filepath.Join(o.out, "oci")); err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	archs := make([]string, 0, len(o.arches))
	for a := range o.arches {
		archs = append(archs, a)
	}
	sort.Strings(archs)

	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, arch := range archs {
		dir := o.arches[arch]
		img, err := image(o, arch, when, []file{
			{"/usr/local/bin/cri-nstarget-install", filepath.Join(dir, "cri-nstarget-install"), 0o755},
			{"/usr/local/share/cri-nstarget/cri-nstarget.service.in", o.unit, 0o644},
		}, []file{
			{"/usr/local/bin/cri-nstarget", filepath.Join(dir, "cri-nstarget"), 0o755},
		})
		if err != nil {
			return fmt.Errorf("%s: %w", arch, err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: "linux", Architecture: arch},
		}})
		if err := dockerTarball(o, arch, img); err != nil {
			return err
		}
	}
	return writeLayout(o, idx, when)
}

// writeLayout writes the index as an OCI layout, its digest, and the
// layout as one tar.
func writeLayout(o options, idx v1.ImageIndex, when time.Time) error {
	oci := filepath.Join(o.out, "oci")
	p, err := layout.Write(oci, empty.Index)
	if err != nil {
		return err
	}
	if err := p.AppendIndex(idx, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": o.version})); err != nil {
		return err
	}
	d, err := idx.Digest()
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(o.out, "digest"), []byte(d.String()+"\n"), 0o644); err != nil {
		return err
	}
	// What a consumer reads: the layout, every digest and size checked.
	back, err := layout.ImageIndexFromPath(oci)
	if err != nil {
		return err
	}
	if err := validate.Index(back); err != nil {
		return fmt.Errorf("the OCI layout does not check: %w", err)
	}
	f, err := os.Create(filepath.Join(o.out, "cri-nstarget-image-"+o.version+".oci.tar"))
	if err != nil {
		return err
	}
	if err := tarDir(f, oci, when); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// image is one architecture's image: the installer's layer, then the
// shim's.
func image(o options, arch string, when time.Time, layers ...[]file) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	var adds []mutate.Addendum
	for i, files := range layers {
		b, err := layerTar(files, when)
		if err != nil {
			return nil, err
		}
		l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
			tarball.WithMediaType(types.OCILayer), tarball.WithCompressionLevel(gzip.DefaultCompression))
		if err != nil {
			return nil, err
		}
		what := []string{"the installer", "the shim"}[i]
		adds = append(adds, mutate.Addendum{Layer: l, History: v1.History{Created: v1.Time{Time: when}, CreatedBy: "nstarget-image: " + what}})
	}
	img, err := mutate.Append(img, adds...)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", arch, v1.Time{Time: when}
	cf.Config.Entrypoint = []string{"/usr/local/bin/cri-nstarget-install"}
	cf.Config.Cmd = []string{"install"}
	// The installer reports the image's version (the shim it carries).
	cf.Config.Env = []string{"PATH=/usr/local/bin", "CRI_NSTARGET_VERSION=" + o.version}
	cf.Config.Labels = map[string]string{
		"org.opencontainers.image.title":       "cri-nstarget",
		"org.opencontainers.image.description": "cri-nstarget and its installer: a DaemonSet puts the CRI shim on each node (deploy/)",
		"org.opencontainers.image.version":     o.version,
		"org.opencontainers.image.revision":    o.revision,
		"org.opencontainers.image.source":      o.source,
		"org.opencontainers.image.licenses":    "Apache-2.0",
		"org.opencontainers.image.created":     when.Format(time.RFC3339),
	}
	return mutate.ConfigFile(img, cf)
}

// layerTar is the layer's uncompressed tar: the files and every directory
// above them, in name order, owned by root, dated when.
func layerTar(files []file, when time.Time) ([]byte, error) {
	type entry struct {
		hdr  *tar.Header
		data []byte
	}
	entries := map[string]entry{}
	for _, f := range files {
		b, err := os.ReadFile(f.src)
		if err != nil {
			return nil, err
		}
		rel := strings.TrimPrefix(f.path, "/")
		entries[rel] = entry{&tar.Header{Typeflag: tar.TypeReg, Name: rel, Mode: f.mode, Size: int64(len(b))}, b}
		for d := path.Dir(rel); d != "."; d = path.Dir(d) {
			entries[d+"/"] = entry{hdr: &tar.Header{Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755}}
		}
	}
	names := make([]string, 0, len(entries))
	for n := range entries {
		names = append(names, n)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, n := range names {
		e := entries[n]
		e.hdr.ModTime, e.hdr.Format = when, tar.FormatPAX
		e.hdr.Uid, e.hdr.Gid, e.hdr.Uname, e.hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(e.hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// dockerTarball writes one architecture as `docker save` writes it.
func dockerTarball(o options, arch string, img v1.Image) error {
	tag, err := name.NewTag(o.repo + ":" + o.version)
	if err != nil {
		return err
	}
	p := filepath.Join(o.out, "cri-nstarget-image-"+o.version+"-linux-"+arch+".tar")
	return tarball.WriteToFile(p, tag, img)
}

// tarDir writes dir as a tar: its files in name order, owned by root,
// dated when.
func tarDir(w io.Writer, dir string, when time.Time) error {
	var paths []string
	if err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			paths = append(paths, p)
		}
		return nil
	}); err != nil {
		return err
	}
	sort.Strings(paths)
	tw := tar.NewWriter(w)
	for _, p := range paths {
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		hdr := &tar.Header{Name: filepath.ToSlash(rel), ModTime: when, Format: tar.FormatPAX, Mode: 0o644, Typeflag: tar.TypeReg}
		if fi.IsDir() {
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, hdr.Name+"/", 0o755
		} else {
			hdr.Size = fi.Size()
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.IsDir() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			if _, err := tw.Write(b); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}
