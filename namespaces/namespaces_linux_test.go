package namespaces

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestStatAndSame(t *testing.T) {
	self, err := Stat("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	if self.Ino == 0 {
		t.Fatal("zero inode")
	}
	same, err := Same("/proc/self/ns/pid", "/proc/thread-self/ns/pid")
	if err != nil || !same {
		t.Errorf("own pid namespace via self and thread-self: same=%v err=%v", same, err)
	}
	same, err = Same("/proc/self/ns/pid", "/proc/self/ns/ipc")
	if err != nil || same {
		t.Errorf("pid and ipc namespaces reported the same: %v %v", same, err)
	}
	if _, err := Stat("/nonexistent/ns"); err == nil {
		t.Error("missing path accepted")
	}
}

func TestOpenOwnProcess(t *testing.T) {
	hs, err := Open(os.Getpid(), []Kind{PID, IPC})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(hs)
	for _, h := range hs {
		want, err := Stat("/proc/self/ns/" + string(h.Kind))
		if err != nil {
			t.Fatal(err)
		}
		if h.ID != want {
			t.Errorf("%s handle = %v, want %v", h.Kind, h.ID, want)
		}
	}
}

// OpenIdentified reads the process's own /proc: its cgroups as
// /proc/self/cgroup shows them, and its NSpid.
func TestOpenIdentifiedOwnProcess(t *testing.T) {
	hs, who, err := OpenIdentified(os.Getpid(), []Kind{PID})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(hs)
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		t.Fatal(err)
	}
	want, _ := parseCgroupPaths(string(b))
	if init, known := who.Init(); len(hs) != 1 || !slices.Equal(who.Cgroups, want) || !known || init {
		t.Errorf("OpenIdentified: %d handles, %+v; want one, the cgroups %q, and told no init of its PID namespace", len(hs), who, want)
	}
	if _, _, err := OpenIdentified(0, []Kind{PID}); err == nil {
		t.Error("pid 0 accepted")
	}
}

// The init of a PID namespace is told so by the kernel, through the
// namespace opened (no status read); a process that is none is told not.
func TestOpenIdentifiedInit(t *testing.T) {
	cmd, child := pidNamespaceInit(t, "needs root: creates a PID namespace")
	for _, tc := range []struct {
		pid  int
		init bool
	}{{child, true}, {cmd.Process.Pid, false}} {
		hs, who, err := OpenIdentified(tc.pid, []Kind{PID})
		if err != nil {
			t.Fatal(err)
		}
		closeAll(hs)
		if init, known := who.Init(); !who.InitTold || who.NSpid != nil || !known || init != tc.init {
			t.Errorf("pid %d: %+v, init %v known %v; want told by the kernel (no NSpid), init %v", tc.pid, who, init, known, tc.init)
		}
	}
	hs, who, err := OpenIdentified(child, []Kind{IPC})
	if err != nil {
		t.Fatal(err)
	}
	closeAll(hs)
	if init, known := who.Init(); who.InitTold || !known || !init {
		t.Errorf("no PID namespace opened: %+v, init %v known %v; want NSpid's word, init", who, init, known)
	}
}

// readProc reads a file whole in one buffer, grown when the file is
// larger (a cgroup file of many hierarchies), and a file that is not there
// is a process gone.
func TestReadProcWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "big")
	want := strings.Repeat("0123456789abcdef", 3*procReadSize/16) + "tail\n"
	if err := os.WriteFile(path, []byte(want), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := readProc(path)
	if err != nil || got != want {
		t.Errorf("readProc of %d bytes: %d bytes, %v; want them all", len(want), len(got), err)
	}
	if _, err := readProc(filepath.Join(path, "gone")); err == nil {
		t.Error("readProc of a missing file: no error")
	}
	if _, err := readProc("/proc/self/nonexistent-entry"); !errors.Is(err, ErrExited) {
		t.Errorf("readProc of a missing /proc entry: %v, want ErrExited", err)
	}
}

func TestOpenExitedProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	_, err := Open(cmd.Process.Pid, []Kind{PID})
	if !errors.Is(err, ErrExited) {
		t.Errorf("err = %v, want ErrExited", err)
	}
	if _, err := Open(0, []Kind{PID}); err == nil {
		t.Error("pid 0 accepted")
	}
}

// TestPinOutlivesProcess pins the PID namespace of a process that is init of
// its own namespace, and checks the pin keeps naming that namespace, that
// HasInit follows the init's life, and that Unpin leaves nothing mounted.
func TestPinOutlivesProcess(t *testing.T) {
	cmd, child := pidNamespaceInit(t, "needs root: creates a PID namespace and bind-mounts it")
	hs, err := Open(child, []Kind{PID})
	if err != nil {
		t.Fatal(err)
	}
	pin := filepath.Join(t.TempDir(), "pins", "c1", "pid")
	if err := Pin(hs[0], pin); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Unpin(pin) })
	closeAll(hs)
	if same, err := Same(pin, "/proc/"+strconv.Itoa(child)+"/ns/pid"); err != nil || !same {
		t.Fatalf("pin does not name the child's namespace: %v %v", same, err)
	}
	for name, hasInit := range map[string]func(string) (bool, error){"HasInit": HasInit, "scanForInit": scanForInit} {
		if live, err := hasInit(pin); err != nil || !live {
			t.Fatalf("%s with init running = %v %v, want true", name, live, err)
		}
	}
	syscall.Kill(child, syscall.SIGKILL)
	cmd.Wait()
	for name, hasInit := range map[string]func(string) (bool, error){"HasInit": HasInit, "scanForInit": scanForInit} {
		if live, err := hasInit(pin); err != nil || live {
			t.Fatalf("%s after init died = %v %v, want false", name, live, err)
		}
	}
	if _, err := Stat(pin); err != nil {
		t.Fatalf("pin gone with the process: %v", err)
	}
	if err := Unpin(pin); err != nil {
		t.Fatal(err)
	}
	if mounted(pin) {
		t.Error("still mounted after Unpin")
	}
	if _, err := os.Stat(pin); !os.IsNotExist(err) {
		t.Errorf("pin file left: %v", err)
	}
	if err := Unpin(pin); err != nil {
		t.Errorf("second Unpin: %v", err)
	}
}

func waitChild(t *testing.T, parent int) int {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		b, _ := os.ReadFile("/proc/" + strconv.Itoa(parent) + "/task/" + strconv.Itoa(parent) + "/children")
		if f := strings.Fields(string(b)); len(f) > 0 {
			pid, _ := strconv.Atoi(f[0])
			return pid
		}
	}
	t.Fatal("unshare started no child")
	return 0
}

// waitGone fails the test unless pid (unshare's forked child, which
// --kill-child kills with unshare) is gone within 5 s: a test leaves no
// process behind, nor the fds it inherited (a CI's lock among them).
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); err != nil || strings.Contains(string(b), ") Z ") {
			return
		}
	}
	t.Errorf("process %d outlived the test", pid)
}

func mounted(path string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return strings.Contains(string(b), " "+path+" ")
}

// pidNamespaceInit starts `sleep 600` as the init of a PID namespace of
// its own (unshare's child), skipping t without root (why) or unshare; it
// returns unshare's command and the init's pid. The init is killed and
// waited for when t ends.
func pidNamespaceInit(t *testing.T, why string) (*exec.Cmd, int) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip(why)
	}
	cmd := exec.Command("unshare", "--pid", "--kill-child", "sleep", "600")
	if err := cmd.Start(); err != nil {
		t.Skipf("unshare unavailable: %v", err)
	}
	child := 0
	t.Cleanup(func() {
		cmd.Process.Kill()
		if child != 0 {
			waitGone(t, child)
		}
	})
	child = waitChild(t, cmd.Process.Pid)
	return cmd, child
}
