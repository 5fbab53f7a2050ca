package baseline

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestKeySum: files count by content, wherever they are; a change to any
// file or value, or a new one, changes the sum; a missing file is an error.
func TestKeySum(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	base := func() Key {
		return Key{
			Files:  map[string]string{"containerd": write("containerd", "v2.4.2"), "kubelet": write("kubelet", "v1.37.2")},
			Values: map[string]string{"focus": "Ephemeral", "kernel": "6.12.0"},
		}
	}
	sum := func(k Key) string {
		t.Helper()
		s, err := k.Sum()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	want := sum(base())
	moved := base()
	moved.Files["kubelet"] = write("kubelet-copy", "v1.37.2")
	if got := sum(moved); got != want {
		t.Errorf("the same kubelet elsewhere: %s, want %s", got, want)
	}
	for name, change := range map[string]func(*Key){
		"a file's content": func(k *Key) { write("kubelet", "v1.37.3") },
		"a value":          func(k *Key) { k.Values["focus"] = "kubectl debug" },
		"a new value":      func(k *Key) { k.Values["skip"] = "Serial" },
		"a new file":       func(k *Key) { k.Files["runc"] = write("runc", "v1.5.2") },
		"a file's role":    func(k *Key) { k.Files["kubelet-old"] = k.Files["kubelet"]; delete(k.Files, "kubelet") },
		"a value's name":   func(k *Key) { k.Values["skip"] = k.Values["focus"]; delete(k.Values, "focus") },
	} {
		k := base()
		change(&k)
		if got := sum(k); got == want {
			t.Errorf("%s changed: the sum stayed %s", name, got)
		}
	}
	k := base()
	os.Remove(k.Files["containerd"])
	if _, err := k.Sum(); err == nil {
		t.Error("a file that is gone: a sum, want an error")
	}
}

// TestCache: a kept run comes back for its key only; an entry that is
// unreadable, cut short, made under another key or lacks a file is
// ignored, and storing again replaces it; no temporary file is left.
func TestCache(t *testing.T) {
	out, c := t.TempDir(), Cache{Dir: filepath.Join(t.TempDir(), "cache"), Kind: "direct"}
	files := map[string]string{"report": filepath.Join(out, "junit.xml"), "log": filepath.Join(out, "run.log")}
	run := func() {
		t.Helper()
		for name, p := range files {
			if err := os.WriteFile(p, []byte("the run's "+name), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	restored := func(key string) bool {
		t.Helper()
		for _, p := range files {
			os.Remove(p)
		}
		ok, err := c.Restore(key, files)
		if err != nil {
			t.Fatal(err)
		}
		for name, p := range files {
			if b, _ := os.ReadFile(p); ok && string(b) != "the run's "+name {
				t.Errorf("restored %s: %q", name, b)
			}
		}
		return ok
	}
	if restored("k1") {
		t.Fatal("an empty cache restored a run")
	}
	run()
	if err := c.Store("k1", files); err != nil {
		t.Fatal(err)
	}
	if !restored("k1") {
		t.Fatal("the stored run was not restored")
	}
	if restored("k2") {
		t.Error("another key restored k1's run")
	}
	whole, _ := os.ReadFile(c.Path("k1"))
	for name, e := range map[string][]byte{
		"cut short":      whole[:len(whole)/2],
		"not JSON":       []byte("garbage"),
		"of another key": bytes.Replace(whole, []byte(`"Key":"k1"`), []byte(`"Key":"k2"`), 1),
		"without a file": []byte(`{"Key":"k1","Files":{"log":"eA=="}}`),
	} {
		os.WriteFile(c.Path("k1"), e, 0o644)
		if restored("k1") {
			t.Errorf("an entry %s was restored", name)
		}
	}
	run()
	if err := c.Store("k1", files); err != nil {
		t.Fatal(err)
	}
	if !restored("k1") {
		t.Error("storing did not replace a bad entry")
	}
	if left, _ := filepath.Glob(filepath.Join(c.Dir, ".direct-*")); len(left) > 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
