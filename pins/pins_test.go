package pins

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
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

// TestThroughNames: the paths answered for others go through the root of
// the holding process; those this process opens do not.
func TestThroughNames(t *testing.T) {
	hs := []*namespaces.Handle{{Kind: namespaces.PID}}
	for _, tc := range []struct {
		desc string
		p    Dir
		want string
	}{
		{desc: "the proxy's", p: New("/run/s/pins"), want: "/run/s/pins/abc/pid"},
		{desc: "the plugin's", p: Through("/run/s/pins", 4242), want: "/proc/4242/root/run/s/pins/abc/pid"},
	} {
		paths, err := tc.p.Paths("abc", hs)
		if err != nil || paths[namespaces.PID] != tc.want {
			t.Errorf("%s: Paths = %v, %v; want %s", tc.desc, paths, err, tc.want)
		}
		if at, _ := tc.p.at("abc", hs); at[namespaces.PID] != "/run/s/pins/abc/pid" {
			t.Errorf("%s: at = %v, want the pin's own path", tc.desc, at)
		}
	}
}

// TestOwner: a spec's path is a pin of the store's directory, through
// some process's root, or it is not.
func TestOwner(t *testing.T) {
	p := Through("/run/s/pins", 1)
	for _, tc := range []struct {
		path string
		pid  int
		id   string
		ok   bool
	}{
		{path: "/proc/4242/root/run/s/pins/abc/pid", pid: 4242, id: "abc", ok: true},
		{path: "/proc/4242/root/run/s/pins/abc", pid: 4242, id: "abc", ok: true},
		{path: "/run/s/pins/abc/pid"},
		{path: "/proc/4242/ns/pid"},
		{path: "/proc/4242/root/run/s/other/abc/pid"},
		{path: "/proc/4242/root/run/s/pinsx/abc/pid"},
		{path: "/proc/4242/root/run/s/pins/../abc/pid"},
		{path: "/proc/0/root/run/s/pins/abc/pid"},
		{path: "/proc/self/root/run/s/pins/abc/pid"},
	} {
		pid, id, ok := p.Owner(tc.path)
		if pid != tc.pid || id != tc.id || ok != tc.ok {
			t.Errorf("Owner(%s) = %d %q %v, want %d %q %v", tc.path, pid, id, ok, tc.pid, tc.id, tc.ok)
		}
	}
}

// TestReachable: the pins directory through this process's root is
// itself; through a pid that is not this process's it is not.
func TestReachable(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pins")
	if err := Reachable(dir, os.Getpid()); err != nil {
		t.Errorf("Reachable(own pid) = %v", err)
	}
	if err := Reachable(dir, 1<<22+1); err == nil || !strings.Contains(err.Error(), "through the root of pid") {
		t.Errorf("Reachable(a pid no process has) = %v, want it unreachable", err)
	}
	other := t.TempDir()
	if err := sameDir(dir, other, 7); err == nil || !strings.Contains(err.Error(), "pid 7 is not this process in the PID namespace of /proc") {
		t.Errorf("sameDir(another directory) = %v, want not the same", err)
	}
}
