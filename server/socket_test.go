package server

import (
	"fmt"
	"net"
	"os"
	"os/exec"
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

// dialProbeEnv makes the test binary, re-executed by TestListenGroupMember
// under another uid, dial the socket it names and exit: 0 when connected, 1
// with the error.
const dialProbeEnv = "NST_SOCKET_DIAL"

// TestListenGroupMember: the socket of operations.md's socket_group example,
// in a directory of its own that Listen creates, under the unit's UMask=0077,
// reached by a process that is not root and is a member of the group; one
// that is not a member is refused. A directory that exists is left alone.
func TestListenGroupMember(t *testing.T) {
	if path := os.Getenv(dialProbeEnv); path != "" {
		c, err := net.Dial("unix", path)
		if err != nil {
			fmt.Println(err)
			os.Exit(1)
		}
		c.Close()
		os.Exit(0)
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root: the probe runs as another uid, and the socket is given to a group the test is not in")
	}
	const uid, gid, otherGid = 61234, 61235, 61236 // used by nobody: no file here is theirs
	exe := probeBinary(t)
	old := syscall.Umask(0o077)
	t.Cleanup(func() { syscall.Umask(old) })

	top := shortDir(t) // stands for /, which anyone enters
	if err := os.Chmod(top, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(top, "run", "cri-nstarget-crictl")
	lis, path, err := Listen("unix://"+filepath.Join(dir, "cri.sock"), strconv.Itoa(gid))
	if err != nil {
		t.Fatal(err)
	}
	defer lis.Close()
	go func() { // accept, so that a connect completes
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if mode, g := modeGid(t, d); mode != 0o750 || g != gid {
			t.Errorf("directory %s: mode %o group %d, want 0750 and group %d", d, mode, g, gid)
		}
	}
	dial := func(groups []uint32) (string, error) {
		cmd := exec.Command(exe, "-test.run=^TestListenGroupMember$")
		cmd.Env = append(os.Environ(), dialProbeEnv+"="+path)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: uid, Gid: otherGid, Groups: groups}}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := dial([]uint32{gid}); err != nil {
		t.Errorf("a member of group %d (uid %d) connects to %s: %v: %s", gid, uid, path, err, out)
	}
	if out, err := dial(nil); err == nil || !strings.Contains(out, "permission denied") {
		t.Errorf("uid %d, not a member of group %d, connects to %s: %v %q, want permission denied", uid, gid, path, err, out)
	}

	// A directory that exists keeps its mode and owner.
	mine := filepath.Join(shortDir(t), "mine")
	if err := os.Mkdir(mine, 0o700); err != nil {
		t.Fatal(err)
	}
	lis2, _, err := Listen(filepath.Join(mine, "cri.sock"), strconv.Itoa(gid))
	if err != nil {
		t.Fatal(err)
	}
	lis2.Close()
	if mode, g := modeGid(t, mine); mode != 0o700 || g != os.Getgid() {
		t.Errorf("existing directory %s: mode %o group %d, want it left 0700 and group %d", mine, mode, g, os.Getgid())
	}
}

// probeBinary is a copy of the test binary that any uid can run (go test's
// own is in a directory only its owner enters).
func probeBinary(t *testing.T) string {
	t.Helper()
	self, err := os.ReadFile("/proc/self/exe")
	if err != nil {
		t.Fatal(err)
	}
	dir := shortDir(t)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(dir, "probe.test")
	if err := os.WriteFile(exe, self, 0o755); err != nil {
		t.Fatal(err)
	}
	return exe
}

func modeGid(t *testing.T, path string) (os.FileMode, int) {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm(), int(fi.Sys().(*syscall.Stat_t).Gid)
}
