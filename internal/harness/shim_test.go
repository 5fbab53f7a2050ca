package harness

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
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

// The plugin's --metrics-address is the harness's, whichever way the
// caller gave one, so that its /healthz tells when it is connected.
func TestWithMetricsAddress(t *testing.T) {
	for _, tc := range []struct{ args, want []string }{
		{nil, []string{"--metrics-address", "127.0.0.1:7"}},
		{[]string{"--log-level", "warn"}, []string{"--log-level", "warn", "--metrics-address", "127.0.0.1:7"}},
		{[]string{"--metrics-address", "127.0.0.1:0", "-x"}, []string{"--metrics-address", "127.0.0.1:7", "-x"}},
		{[]string{"--metrics-address=127.0.0.1:0"}, []string{"--metrics-address=127.0.0.1:7"}},
	} {
		if got := withMetricsAddress(tc.args, "127.0.0.1:7"); !slices.Equal(got, tc.want) {
			t.Errorf("withMetricsAddress(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}
