package harness

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func buildForTest(t *testing.T, cmd ...string) *Image {
	t.Helper()
	if _, err := os.Stat(BusyboxPath); err != nil {
		t.Skipf("skipping: no static busybox at %s: %v", BusyboxPath, err)
	}
	img, err := BuildBusybox(cmd)
	if err != nil {
		t.Fatalf("BuildBusybox: %v", err)
	}
	return img
}

func TestBuildBusybox(t *testing.T) {
	img := buildForTest(t, "sleep", "1")
	var manifest ocispec.Manifest
	if err := json.Unmarshal(img.Manifest, &manifest); err != nil {
		t.Fatal(err)
	}
	if manifest.MediaType != ocispec.MediaTypeImageManifest || len(manifest.Layers) != 1 {
		t.Fatalf("manifest: %s", img.Manifest)
	}
	if manifest.Config.Digest != img.ConfigDigest || img.ManifestDigest != digest.FromBytes(img.Manifest) {
		t.Errorf("digests: manifest config %s, image config %s", manifest.Config.Digest, img.ConfigDigest)
	}
	var config ocispec.Image
	if err := json.Unmarshal(img.Config, &config); err != nil {
		t.Fatal(err)
	}
	if got := config.Config.Cmd; len(got) != 2 || got[0] != "sleep" || config.OS != "linux" {
		t.Errorf("config: %s", img.Config)
	}
	layer, ok := img.Blob(manifest.Layers[0].Digest)
	if !ok || int64(len(layer)) != manifest.Layers[0].Size {
		t.Fatalf("layer %s: found %v, %d bytes", manifest.Layers[0].Digest, ok, len(layer))
	}
	entries, diffID := readLayer(t, layer)
	if len(config.RootFS.DiffIDs) != 1 || config.RootFS.DiffIDs[0] != diffID {
		t.Errorf("diff_ids %v, want [%s]", config.RootFS.DiffIDs, diffID)
	}
	for name, want := range map[string]byte{
		"bin/busybox": tar.TypeReg, "bin/sh": tar.TypeLink, "bin/sleep": tar.TypeLink,
		"etc/passwd": tar.TypeReg, "etc/group": tar.TypeReg, "proc/": tar.TypeDir, "tmp/": tar.TypeDir,
	} {
		if got, ok := entries[name]; !ok || got.Typeflag != want {
			t.Errorf("layer entry %s: %+v, want type %c", name, got, want)
		}
	}
	if link := entries["bin/sh"].Linkname; link != "bin/busybox" {
		t.Errorf("bin/sh links to %q, want bin/busybox", link)
	}
}

func TestBuildBusyboxIsReproducible(t *testing.T) {
	a, b := buildForTest(t, "sh"), buildForTest(t, "sh")
	if a.ManifestDigest != b.ManifestDigest {
		t.Errorf("two builds differ: %s and %s", a.ManifestDigest, b.ManifestDigest)
	}
}

// readLayer returns the entries of a gzip tar layer and its diff ID.
func readLayer(t *testing.T, layer []byte) (map[string]*tar.Header, digest.Digest) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	entries := map[string]*tar.Header{}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		entries[hdr.Name] = hdr
	}
	return entries, digest.FromBytes(raw)
}
