package pins

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestDirRefusesPaths: ids reach the pin store from clients; none may
// name a path outside the pin directory.
func TestDirRefusesPaths(t *testing.T) {
	p := New(t.TempDir() + "/pins")
	for _, id := range []string{"..", "../x", "/etc", "a/b", "", "a\x00b"} {
		if _, ok := p.containerDir(id); ok {
			t.Errorf("containerDir(%q) accepted", id)
		}
		if err := p.Release(id); err != nil {
			t.Errorf("Release(%q): %v", id, err)
		}
		if err := p.Hold(id, nil); err == nil {
			t.Errorf("Hold(%q) accepted", id)
		}
	}
	if ids, err := p.IDs(); err != nil || len(ids) != 0 {
		t.Errorf("IDs of a missing dir = %v %v", ids, err)
	}
}

// FuzzValidateID: an accepted id is plain ASCII of bounded length and can
// never name a path outside the pin directory.
func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"abc", "", ".", "..", "a..b", "a/b", "/etc", "a\x00", "é", "-a", "a-", "a.b_c-d", strings.Repeat("f", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if ValidateID(id) != nil {
			return
		}
		if id == "" || len(id) > MaxIDLen || strings.ContainsAny(id, "/\x00") || strings.Contains(id, "..") {
			t.Fatalf("accepted %q", id)
		}
		for i := 0; i < len(id); i++ {
			if id[i] >= 0x80 {
				t.Fatalf("accepted non-ASCII %q", id)
			}
		}
		if filepath.Dir(filepath.Join("/pins", id, "pid")) != filepath.Join("/pins", id) || filepath.Dir(filepath.Join("/pins", id)) != "/pins" {
			t.Fatalf("%q escapes the pin directory", id)
		}
	})
}
