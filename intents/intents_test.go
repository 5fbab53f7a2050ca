package intents

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDir: records are written whole and listed back; a temporary
// file is neither listed nor removed (it may be a Put in flight).
func TestDir(t *testing.T) {
	d := New(filepath.Join(t.TempDir(), "intents"))
	if l, err := d.List(); err != nil || len(l) != 0 {
		t.Fatalf("List of a missing dir = %v, %v", l, err)
	}
	rec := Record{ID: NewID(), Sandbox: "s", Name: "n", Attempt: 2, Target: "t"}
	if err := d.Put(rec); err != nil {
		t.Fatal(err)
	}
	rec.Container = "c"
	if err := d.Put(rec); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(d.dir, "x.json.tmp"), []byte("{"), 0o600)
	l, err := d.List()
	if err != nil || len(l) != 1 || l[0] != rec {
		t.Fatalf("List = %+v, %v; want [%+v]", l, err, rec)
	}
	if _, err := os.Stat(filepath.Join(d.dir, "x.json.tmp")); err != nil {
		t.Errorf("a temporary file (perhaps a Put in flight) was touched: %v", err)
	}
	if err := d.Remove(rec.ID); err != nil {
		t.Fatal(err)
	}
	if err := d.Remove(rec.ID); err != nil {
		t.Errorf("removing a gone record: %v", err)
	}
}

// TestReconcileRetries: a start-up reconcile that fails (containerd down)
// goes on in the background until it succeeds.
