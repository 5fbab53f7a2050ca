package server

import (
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

func TestSocketPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"unix:///run/x.sock", "/run/x.sock"},
		{"/run/x.sock", "/run/x.sock"},
		{"/run/a://b.sock", "/run/a:/b.sock"}, // odd but absolute, as config accepts it
		{"unix:///run//a/../x.sock", "/run/x.sock"},
		{"run/x.sock", ""},
		{"unix://run/x.sock", ""},
		{"tcp://127.0.0.1:1", ""},
		{"", ""},
	} {
		got, err := SocketPath(tc.in)
		if got != tc.want || (err == nil) != (tc.want != "") {
			t.Errorf("SocketPath(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func shortDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/tmp", "nst-sock-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestListen(t *testing.T) {
	t.Run("bare path, mode 0660", func(t *testing.T) {
		path := filepath.Join(shortDir(t), "sub", "cri.sock")
		lis, got, err := Listen(path, "")
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		fi, err := os.Stat(got)
		if got != path || err != nil || fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o660 {
			t.Errorf("socket %q: %v %v, want a socket of mode 0660 at %q", got, fi.Mode(), err, path)
		}
	})
	t.Run("stale socket replaced", func(t *testing.T) {
		path := filepath.Join(shortDir(t), "cri.sock")
		old, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		old.(*net.UnixListener).SetUnlinkOnClose(false)
		old.Close() // the file stays, nobody serves it: what a crash leaves
		lis, _, err := Listen("unix://"+path, "")
		if err != nil {
			t.Fatalf("Listen over a stale socket: %v", err)
		}
		lis.Close()
	})
	t.Run("served socket refused", func(t *testing.T) {
		path := filepath.Join(shortDir(t), "cri.sock")
		live, err := net.Listen("unix", path)
		if err != nil {
			t.Fatal(err)
		}
		defer live.Close()
		if lis, _, err := Listen(path, ""); err == nil || !strings.Contains(err.Error(), "another process serves") {
			if lis != nil {
				lis.Close()
			}
			t.Errorf("Listen on a served socket: %v, want refused", err)
		}
	})
	t.Run("not a socket refused", func(t *testing.T) {
		path := filepath.Join(shortDir(t), "cri.sock")
		os.WriteFile(path, []byte("x"), 0o600)
		if _, _, err := Listen(path, ""); err == nil || !strings.Contains(err.Error(), "not a socket") {
			t.Errorf("Listen on a regular file: %v, want refused", err)
		}
		if b, _ := os.ReadFile(path); string(b) != "x" {
			t.Error("the regular file was touched")
		}
	})
	t.Run("relative path refused", func(t *testing.T) {
		if _, _, err := Listen("cri.sock", ""); err == nil {
			t.Error("Listen on a relative path succeeded")
		}
	})
	t.Run("group by gid", func(t *testing.T) {
		path := filepath.Join(shortDir(t), "cri.sock")
		gid := os.Getgid() // a group of one's own needs no privilege
		lis, _, err := Listen(path, strconv.Itoa(gid))
		if err != nil {
			t.Fatal(err)
		}
		defer lis.Close()
		fi, _ := os.Stat(path)
		if st := fi.Sys().(*syscall.Stat_t); int(st.Gid) != gid {
			t.Errorf("socket group %d, want %d", st.Gid, gid)
		}
	})
	t.Run("unknown group refused", func(t *testing.T) {
		if _, _, err := Listen(filepath.Join(shortDir(t), "cri.sock"), "no-such-group-nst"); err == nil {
			t.Error("Listen with an unknown group succeeded")
		}
	})
}
