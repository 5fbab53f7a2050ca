package harness

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestKeepLogs(t *testing.T) {
	dir, dst := t.TempDir(), filepath.Join(t.TempDir(), "kept", "leg")
	for name, text := range map[string]string{
		"c/containerd.log": "containerd\n", "s/cri-nstarget.log": "shim\n",
		"c/config.toml": "not a log\n", "top.log": "not a component's\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := KeepLogs(dir, dst); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dst)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, e := range entries {
		kept = append(kept, e.Name())
	}
	if want := []string{"containerd.log", "cri-nstarget.log"}; !slices.Equal(kept, want) {
		t.Errorf("kept %q, want %q", kept, want)
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "cri-nstarget.log")); string(b) != "shim\n" {
		t.Errorf("cri-nstarget.log holds %q", b)
	}
	if err := KeepLogs(dir, filepath.Join(dir, "c", "config.toml", "x")); err == nil {
		t.Error("no error for a dst that cannot be made")
	}
}
