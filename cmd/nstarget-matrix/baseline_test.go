package main

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cri-nstarget/cri-nstarget/internal/baseline"
)

// TestDirectKeyChangesWithEachInput: the key of critest's direct run is
// the same for the same inputs (the binaries by content, wherever they
// are) and changes when any one input changes.
func TestDirectKeyChangesWithEachInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	roles := []string{"critest", "ginkgo", "containerd", "containerd-shim-runc-v2", "runc", "cni bridge"}
	base := func() directKey {
		k := directKey{
			Binaries: map[string]string{},
			Config:   "version = 4\nroot = \"$DIR/root\"\n",
			CNI:      `{"bridge": "$BRIDGE"}`,
			Skips:    []skipEntry{{"SELinux", "no SELinux here"}},
			Args:     critestArgs("$ENDPOINT", "$OUT/critest.xml", nil, []string{"-nri-socket", "$DIR/nri.sock"}),
			Images:   map[string]string{"pause:3.9": "sha256:aa", "e2e-test-images/busybox:1.29-2": "sha256:bb"},
			Kernel:   "6.12.0",
		}
		for _, r := range roles {
			k.Binaries[r] = write(r, "build of "+r)
		}
		return k
	}
	sum := func(k directKey) string {
		t.Helper()
		s, err := k.sum()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	want := sum(base())
	moved := base()
	moved.Binaries["critest"] = write("critest-elsewhere", "build of critest")
	if got := sum(moved); got != want {
		t.Errorf("the same critest at another path: key %s, want %s", got, want)
	}
	changes := map[string]func(*directKey){
		"config":      func(k *directKey) { k.Config += "[plugins]\n" },
		"CNI network": func(k *directKey) { k.CNI = `{"bridge": "$BRIDGE", "mtu": 1400}` },
		"skip list":   func(k *directKey) { k.Skips = append(k.Skips, skipEntry{"AppArmor", "none"}) },
		"skip reason": func(k *directKey) { k.Skips = []skipEntry{{"SELinux", "another reason"}} },
		"args":        func(k *directKey) { k.Args = critestArgs("$ENDPOINT", "$OUT/critest.xml", nil, nil) },
		"image":       func(k *directKey) { k.Images["pause:3.9"] = "sha256:cc" },
		"new image":   func(k *directKey) { k.Images["nginx:1.14-2"] = "sha256:dd" },
		"kernel":      func(k *directKey) { k.Kernel = "6.13.0" },
	}
	for _, r := range roles {
		changes["binary "+r] = func(k *directKey) { write(r, "another build of "+r) }
	}
	for _, name := range slices.Sorted(maps.Keys(changes)) {
		k := base()
		changes[name](&k)
		if got := sum(k); got == want {
			t.Errorf("%s changed: the key stayed %s", name, got)
		}
	}
	k := base()
	os.Remove(k.Binaries["runc"])
	if _, err := k.sum(); err == nil {
		t.Error("a binary that is gone: a key, want an error")
	}
}

// TestRestoreDirectWantsACleanRun: a kept direct run comes back as
// critest's result only when it is one critest could have written with
// exit 0 (a report, no failed spec); otherwise critest runs again.
func TestRestoreDirectWantsACleanRun(t *testing.T) {
	out, c := t.TempDir(), baseline.Cache{Dir: t.TempDir(), Kind: "critest-direct"}
	junit, log := filepath.Join(out, "critest-direct.xml"), filepath.Join(out, "critest-direct.log")
	for _, tc := range []struct {
		desc, report string
		want         bool
	}{
		{"all passed", junitAllPass, true},
		{"failed specs", junitSample, false},
		{"no spec", junitNoSpecs, false},
		{"no report", "", false},
	} {
		for p, b := range map[string]string{junit: tc.report, jsonReport(junit): "[]", log: "output\n"} {
			if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Store("k", critestFiles(junit, log)); err != nil {
			t.Fatal(err)
		}
		r, ok, err := restoreDirect(c, "k", junit, log)
		if err != nil {
			t.Fatal(err)
		}
		if ok != tc.want || ok && len(r.Passed) != 2 {
			t.Errorf("%s: restored %v (%d passed), want %v", tc.desc, ok, len(r.Passed), tc.want)
		}
	}
}
