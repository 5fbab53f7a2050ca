package upstream

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// The stand-ins are there under the names the specs pull; pause is the
// harness's sandbox image byte for byte; agnhost keeps the upstream image's
// entrypoint.
func TestImages(t *testing.T) {
	if _, err := os.Stat(harness.BusyboxPath); err != nil {
		t.Skipf("skipping: no static busybox at %s: %v", harness.BusyboxPath, err)
	}
	agnhost := filepath.Join(t.TempDir(), "agnhost")
	if err := os.WriteFile(agnhost, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	images, err := Images(harness.BusyboxPath, agnhost)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{BusyboxName, NginxName, AgnhostName, PauseName} {
		if images[name] == nil {
			t.Errorf("no image %s", name)
		}
	}
	sandbox, err := harness.BuildPause()
	if err != nil {
		t.Fatal(err)
	}
	if images[PauseName].ManifestDigest != sandbox.ManifestDigest {
		t.Errorf("%s is %s, the sandbox image %s", PauseName, images[PauseName].ManifestDigest, sandbox.ManifestDigest)
	}
	var cfg ocispec.Image
	if err := json.Unmarshal(images[AgnhostName].Config, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != "/agnhost" {
		t.Errorf("agnhost entrypoint = %v, want [/agnhost]", cfg.Config.Entrypoint)
	}
	if Ref(BusyboxName) != "registry.k8s.io/e2e-test-images/busybox:1.37.0-2" {
		t.Errorf("Ref(BusyboxName) = %s", Ref(BusyboxName))
	}
	if _, err := Images(harness.BusyboxPath, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Images without an agnhost binary: no error")
	}
}
