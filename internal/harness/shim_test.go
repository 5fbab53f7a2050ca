package harness

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
)

// The tests build the shim with the Makefile's tags, named there once.
func TestShimTagsAreTheMakefiles(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^SHIM_TAGS\s*:=\s*(\S+)\s*$`).FindSubmatch(b)
	if m == nil || string(m[1]) != ShimTags {
		t.Errorf("the Makefile's SHIM_TAGS is %q, ShimTags %q", m, ShimTags)
	}
}

// The harness turns events off only in a binary that has them: an older
// one (a benchmark's baseline) would refuse the flag.
func TestHasFlag(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "shim")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho 'Usage of cri-nstarget:\n  -config string\n  -events-kubeconfig string' >&2\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if !hasFlag(bin, "events-kubeconfig") || hasFlag(bin, "events") || hasFlag(bin, "nri-socket") {
		t.Error("hasFlag reads the usage wrong")
	}
}
