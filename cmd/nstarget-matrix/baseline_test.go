package main

import (
	"bytes"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"
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
	roles := []string{"critest", "containerd", "containerd-shim-runc-v2", "runc", "cni bridge"}
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

// TestBaselineCache: a kept direct run is restored for its key only; an
// entry that is unreadable, cut short, made under another key or not clean
// is ignored (the caller runs critest again), and storing replaces it.
func TestBaselineCache(t *testing.T) {
	out, c := t.TempDir(), baselineCache{filepath.Join(t.TempDir(), "cache")}
	junit, log := filepath.Join(out, "critest-direct.xml"), filepath.Join(out, "critest-direct.log")
	writeRun := func(report string) {
		t.Helper()
		for p, b := range map[string]string{junit: report, jsonReport(junit): "[]", log: "critest's output\n"} {
			if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	restored := func(key string) bool {
		t.Helper()
		for _, p := range []string{junit, jsonReport(junit), log} {
			os.Remove(p)
		}
		r, ok, err := c.restore(key, junit, log)
		if err != nil {
			t.Fatal(err)
		}
		if ok && len(r.Passed) != 2 {
			t.Errorf("restored %d passed specs, want 2", len(r.Passed))
		}
		return ok
	}
	if restored("k1") {
		t.Fatal("an empty cache restored a run")
	}
	writeRun(junitAllPass)
	if err := c.store("k1", junit, log); err != nil {
		t.Fatal(err)
	}
	if !restored("k1") {
		t.Fatal("the stored run was not restored")
	}
	if b, _ := os.ReadFile(log); string(b) != "critest's output\n" {
		t.Errorf("restored log %q", b)
	}
	if restored("k2") {
		t.Error("another key restored k1's run")
	}
	if left, _ := filepath.Glob(filepath.Join(c.Dir, ".critest-direct-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
	whole, _ := os.ReadFile(c.path("k1"))
	for name, entry := range map[string][]byte{
		"cut short":   whole[:len(whole)/2],
		"not JSON":    []byte("garbage"),
		"another key": bytes.Replace(whole, []byte(`"Key":"k1"`), []byte(`"Key":"k2"`), 1),
		"no report":   []byte(`{"Key":"k1","Log":"eA=="}`),
	} {
		os.WriteFile(c.path("k1"), entry, 0o644)
		if restored("k1") {
			t.Errorf("an entry %s was restored", name)
		}
	}
	writeRun(junitSample) // failed specs: not a baseline to keep reusing
	c.store("k1", junit, log)
	if restored("k1") {
		t.Error("a run with failed specs was restored")
	}
	writeRun(junitAllPass)
	if err := c.store("k1", junit, log); err != nil {
		t.Fatal(err)
	}
	if !restored("k1") {
		t.Error("storing did not replace a bad entry")
	}
}
