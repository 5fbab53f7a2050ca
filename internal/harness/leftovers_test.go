package harness

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestEntriesAdded(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(a, "old"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	before := ListEntries([]string{a, b, filepath.Join(a, "missing")})
	for _, p := range []string{filepath.Join(b, "new"), filepath.Join(a, "also")} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got := before.Added(ListEntries([]string{a, b}))
	if want := []string{filepath.Join(a, "also"), filepath.Join(b, "new")}; !slices.Equal(got, want) {
		t.Errorf("Added = %q, want %q", got, want)
	}
}

func TestProcessesNaming(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("sh", "-c", "sleep 60", dir) // $0 is dir
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	var left []string
	for range 100 { // until the child has exec'd sleep
		if left = ProcessesNaming(dir); len(left) > 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(left) != 1 || !strings.Contains(left[0], "sleep 60 "+dir) {
		t.Errorf("ProcessesNaming(%s) = %q, want the sleep naming it", dir, left)
	}
}
