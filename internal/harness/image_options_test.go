package harness

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestBuildImageOptions(t *testing.T) {
	if _, err := os.Stat(BusyboxPath); err != nil {
		t.Skipf("skipping: no static busybox at %s: %v", BusyboxPath, err)
	}
	img, err := BuildImage(ImageOptions{
		Entrypoint: []string{"/usr/sbin/x"},
		Cmd:        []string{"pause"},
		User:       "www-data:1004",
		Files: []File{
			{Name: "etc/passwd", Mode: 0o644, Data: []byte("www-data:x:33:33::/:/bin/false\n")},
			{Name: "usr/sbin/x", Mode: 0o4755, Data: []byte("x")},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(img.Config, &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "www-data:1004" || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/usr/sbin/x" ||
		len(cfg.Config.Cmd) != 1 || cfg.Config.Cmd[0] != "pause" {
		t.Errorf("image config = %+v", cfg.Config)
	}
	var layer []byte
	for _, b := range img.Layers {
		layer = b
	}
	zr, err := gzip.NewReader(bytes.NewReader(layer))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	seen := map[string]*tar.Header{}
	passwds := 0
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "etc/passwd" {
			passwds++
			if b, _ := io.ReadAll(tr); !bytes.HasPrefix(b, []byte("www-data")) {
				t.Errorf("etc/passwd = %q, want the replacement", b)
			}
		}
		if h.Typeflag == tar.TypeReg && (h.Name == "usr/sbin/x") && (seen["usr/"] == nil || seen["usr/sbin/"] == nil) {
			t.Errorf("%s comes before its parent directories", h.Name)
		}
		seen[h.Name] = h
	}
	if passwds != 1 {
		t.Errorf("etc/passwd appears %d times", passwds)
	}
	if h := seen["usr/sbin/x"]; h == nil || h.Mode != 0o4755 {
		t.Errorf("usr/sbin/x = %+v, want mode 04755", h)
	}
}
