package upstream

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/cri-nstarget/cri-nstarget/internal/baseline"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// DirectInputs is what the specs' run with the kubelet on containerd
// directly depends on: none of it is the shim, so that run's result is
// kept under their key (baseline) and reused while they are the same.
type DirectInputs struct {
	// Binaries by role: e2e.test (the specs' source at its release), the
	// project's nstarget-e2e.test, the kubelet, the control plane, kubectl,
	// etcd, containerd, its runc shim, runc and the CNI plugins.
	Binaries map[string]string
	// NodeConfig is what the test rig gives containerd and the cluster's
	// components (harness.NodeConfig, cluster.NodeConfig): the rig's code
	// itself is not in the key, so that a change to it that leaves their
	// configuration alone keeps the key.
	NodeConfig string
	// Args are each suite's command line, its paths made placeholders.
	Args   string
	Images map[string]*harness.Image // the specs' images, built here: by manifest digest
	// The run: the specs' selection, processes and bound.
	Focus, Skip string
	Procs       int
	Timeout     time.Duration
	Versions    string // e2e.test's and the kubelet's, as they report them
	Kernel      string // the host's kernel release
}

// DirectKey is the inputs' key.
func DirectKey(in DirectInputs) baseline.Key {
	var images strings.Builder
	for _, name := range slices.Sorted(maps.Keys(in.Images)) {
		fmt.Fprintf(&images, "%q %s\n", name, in.Images[name].ManifestDigest)
	}
	return baseline.Key{Files: in.Binaries, Values: map[string]string{
		"images": images.String(), "focus": in.Focus, "skip": in.Skip,
		"procs": fmt.Sprint(in.Procs), "timeout": in.Timeout.String(),
		"versions": in.Versions, "kernel": in.Kernel, "node config": in.NodeConfig, "args": in.Args,
	}}
}

// Clean reports whether a run's results may stand as a baseline: at least
// one spec passed and none failed (a spec that fails directly is run again
// the next time, not kept).
func Clean(results []Result) bool {
	passed := false
	for _, r := range results {
		switch {
		case r.Passed():
			passed = true
		case r.State != "skipped":
			return false
		}
	}
	return passed
}
