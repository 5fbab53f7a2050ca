package harness

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

func TestRegistry(t *testing.T) {
	img := buildForTest(t, "sh")
	reg, err := StartRegistry(map[string]*Image{"nst/busybox:1": img})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := reg.Close(); err != nil {
			t.Error(err)
		}
	})
	if want := reg.Host() + "/nst/busybox:1"; reg.Ref("nst/busybox:1") != want {
		t.Errorf("Ref = %q, want %q", reg.Ref("nst/busybox:1"), want)
	}
	layer := firstKey(img.Layers)
	base := "http://" + reg.Host() + "/v2/"
	tests := []struct {
		desc, method, path string
		status             int
		contentType        string
		body               []byte
	}{
		{"ping", "GET", "", 200, "application/json", []byte("{}")},
		{"manifest by tag", "GET", "nst/busybox/manifests/1", 200, ocispec.MediaTypeImageManifest, img.Manifest},
		{"manifest head", "HEAD", "nst/busybox/manifests/1", 200, ocispec.MediaTypeImageManifest, nil},
		{"manifest by digest", "GET", "nst/busybox/manifests/" + img.ManifestDigest.String(), 200, ocispec.MediaTypeImageManifest, img.Manifest},
		{"config blob", "GET", "nst/busybox/blobs/" + img.ConfigDigest.String(), 200, "application/octet-stream", img.Config},
		{"layer head", "HEAD", "nst/busybox/blobs/" + layer.String(), 200, "application/octet-stream", nil},
		{"unknown tag", "GET", "nst/busybox/manifests/2", 404, "application/json", nil},
		{"unknown repo", "GET", "nst/other/manifests/1", 404, "application/json", nil},
		{"unknown blob", "GET", "nst/busybox/blobs/sha256:00", 404, "application/json", nil},
		{"write", "PUT", "nst/busybox/manifests/1", 405, "application/json", nil},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, base+tc.path, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != tc.contentType {
				t.Fatalf("%s %s: %d %q, want %d %q", tc.method, tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), tc.status, tc.contentType)
			}
			if tc.status != 200 {
				var e struct{ Errors []struct{ Code string } }
				if err := json.Unmarshal(body, &e); err != nil || len(e.Errors) != 1 || e.Errors[0].Code == "" {
					t.Errorf("error body %q: %v", body, err)
				}
				return
			}
			if tc.body != nil && string(body) != string(tc.body) {
				t.Errorf("body differs: %d bytes, want %d", len(body), len(tc.body))
			}
			if tc.path != "" && resp.Header.Get("Docker-Content-Digest") == "" {
				t.Error("no Docker-Content-Digest")
			}
			if tc.body != nil && resp.Header.Get("Content-Length") != strconv.Itoa(len(tc.body)) {
				t.Errorf("Content-Length %q, want %d", resp.Header.Get("Content-Length"), len(tc.body))
			}
		})
	}
}

func TestStartRegistryRejectsBadKey(t *testing.T) {
	if _, err := StartRegistry(map[string]*Image{"nst/busybox": {}}); err == nil {
		t.Error("StartRegistry accepted a key without a tag")
	}
}

func firstKey[K comparable, V any](m map[K]V) K {
	for k := range m {
		return k
	}
	var zero K
	return zero
}
