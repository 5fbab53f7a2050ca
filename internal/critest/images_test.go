package critest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// TestBenchImages checks that the images critest -benchmark pulls are there
// besides the conformance ones, and that one build serves all tags of an
// image.
func TestBenchImages(t *testing.T) {
	if _, err := os.Stat(harness.BusyboxPath); err != nil {
		t.Skipf("skipping: no static busybox at %s: %v", harness.BusyboxPath, err)
	}
	standin := filepath.Join(t.TempDir(), "standin")
	if err := os.WriteFile(standin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	images, err := BenchImages(harness.BusyboxPath, standin)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{harness.PauseName, "e2e-test-images/busybox:1.29-2", "docker/library/busybox:1.35.0-glibc", "docker/library/busybox:1-musl"} {
		if images[k] == nil {
			t.Errorf("no image %q", k)
		}
	}
	const tags = "k8s-staging-cri-tools/test-image-tags:"
	if images[tags+"1"] == nil || images[tags+"1"] != images[tags+"3"] {
		t.Errorf("%s1 and %s3: want one image under both", tags, tags)
	}
	if _, err := Images(harness.BusyboxPath, filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("Images with a missing stand-in binary: no error")
	}
}
