package main

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/cri-nstarget/cri-nstarget/internal/baseline"
)

// directKey is everything critest's direct run against containerd depends
// on: that run is a baseline of containerd, runc and critest, not of our
// code, so its result is kept under the key and reused while none of these
// change.
type directKey struct {
	Binaries map[string]string // what runs, by role: critest, containerd, its runc shim, runc, the CNI plugins
	Config   string            // containerd's config.toml, its directory and the registry's address made placeholders
	CNI      string            // the pods' CNI network, likewise
	Skips    []skipEntry       // the skip list
	Args     []string          // critest's arguments, the paths made placeholders
	Images   map[string]string // each image critest pulls, built here: its manifest digest
	Kernel   string            // the host's kernel release
}

// sum is the key's hash (baseline.Key): the binaries by content, the rest
// as written.
func (k directKey) sum() (string, error) {
	var skips, images strings.Builder
	for _, s := range k.Skips {
		fmt.Fprintf(&skips, "%q %q\n", s.pattern, s.reason)
	}
	for _, name := range slices.Sorted(maps.Keys(k.Images)) {
		fmt.Fprintf(&images, "%q %s\n", name, k.Images[name])
	}
	return baseline.Key{Files: k.Binaries, Values: map[string]string{
		"config": k.Config, "cni": k.CNI, "skips": skips.String(), "images": images.String(),
		"args": fmt.Sprintf("%q", k.Args), "kernel": k.Kernel,
	}}.Sum()
}

// critestFiles are the files of a critest run kept as its baseline.
func critestFiles(junit, log string) map[string]string {
	return map[string]string{"junit": junit, "ginkgo": jsonReport(junit), "log": log}
}

// restoreDirect writes the direct run kept under key beside junit and
// reads it back as critest's result; ok is false when none is kept, or
// what is kept is not a clean run (critestResult of an exit 0: a report
// with specs, none failed): then
// the caller runs critest and stores what it wrote.
func restoreDirect(c baseline.Cache, key, junit, log string) (r junitResult, ok bool, err error) {
	if ok, err = c.Restore(key, critestFiles(junit, log)); !ok || err != nil {
		return r, false, err
	}
	if r, err = critestResult(nil, junit, log); err != nil {
		fmt.Printf("  direct run: the kept run %s is not a clean run (%v); running it again\n", c.Path(key), err)
		return junitResult{}, false, nil
	}
	return r, true, nil
}

// placeholders replaces each old string (a run's directory, the registry's
// address) by its placeholder.
func placeholders(s string, oldNew ...string) string {
	return strings.NewReplacer(oldNew...).Replace(s)
}

// kernelRelease is the host's kernel release.
func kernelRelease() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/osrelease")
	return strings.TrimSpace(string(b)), err
}
