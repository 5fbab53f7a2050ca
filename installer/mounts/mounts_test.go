package mounts

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestUnder(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "proc/1"), 0o755); err != nil {
		t.Fatal(err)
	}
	info := `22 1 0:21 / /run rw,nosuid,nodev shared:5 - tmpfs tmpfs rw
640 22 0:4 net:[4026532281] /run/cri-nstarget/pins/abc/pid rw shared:5 - nsfs nsfs rw
641 22 0:4 net:[4026532282] /run/cri-nstarget/pins/a\040b/ipc rw shared:5 - nsfs nsfs rw
642 22 0:4 net:[4026532283] /run/cri-nstarget-other/x rw shared:5 - nsfs nsfs rw
`
	if err := os.WriteFile(filepath.Join(root, "proc/1/mountinfo"), []byte(info), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Host{Root: root}.Under("/run/cri-nstarget")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/run/cri-nstarget/pins/abc/pid", "/run/cri-nstarget/pins/a b/ipc"}
	if !slices.Equal(got, want) {
		t.Errorf("Under = %q, want %q", got, want)
	}
}
