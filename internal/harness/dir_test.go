package harness

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestTempDirIsTraversable(t *testing.T) {
	dir, err := TempDir("nst-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != DirMode {
		t.Errorf("TempDir made %s with mode %#o, want %#o", dir, fi.Mode().Perm(), DirMode)
	}
	if err := prepareDir(filepath.Join(dir, "c")); err != nil {
		t.Errorf("prepareDir under TempDir: %v", err)
	}
	fi, err = os.Stat(filepath.Join(dir, "c"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != DirMode {
		t.Errorf("prepareDir made mode %#o, want %#o", fi.Mode().Perm(), DirMode)
	}
}

// A 0700 directory above containerd's (os.MkdirTemp's mode) is refused, and
// the error names it.
func TestPrepareDirRefusesPrivateParent(t *testing.T) {
	parent, err := os.MkdirTemp("/tmp", "nst-test-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(parent)
	// An existing 0700 containerd dir is made DirMode: the harness owns it.
	dir := filepath.Join(parent, "c")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	err = prepareDir(dir)
	if err == nil || !strings.Contains(err.Error(), parent+" (mode 0700) is not traversable") {
		t.Fatalf("prepareDir under a 0700 parent: %v, want an error naming %s", err, parent)
	}
	if fi, err := os.Stat(dir); err != nil {
		t.Error(err)
	} else if fi.Mode().Perm() != DirMode {
		t.Errorf("containerd dir has mode %#o, want %#o", fi.Mode().Perm(), DirMode)
	}
	if err := os.Chmod(parent, DirMode); err != nil {
		t.Fatal(err)
	}
	if err := prepareDir(dir); err != nil {
		t.Errorf("prepareDir under a %#o parent: %v", DirMode, err)
	}
}
