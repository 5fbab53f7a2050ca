package namespaces

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"
)

// A process in a user namespace of its own (made by an unprivileged user,
// as a container's may be) with a PID namespace that user namespace owns:
// the host's user namespace and the owner can join it; a sibling user
// namespace (another pod's) cannot.
func TestCanJoin(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: runs processes as another user")
	}
	owned := exec.Command("setpriv", "--reuid=1000", "--regid=1000", "--clear-groups",
		"unshare", "--user", "--map-root-user", "--pid", "--kill-child", "sleep", "600")
	sibling := exec.Command("setpriv", "--reuid=1001", "--regid=1001", "--clear-groups",
		"unshare", "--user", "sleep", "600")
	for _, cmd := range []*exec.Cmd{owned, sibling} {
		if err := cmd.Start(); err != nil {
			t.Skipf("setpriv/unshare unavailable: %v", err)
		}
		defer func(cmd *exec.Cmd) { cmd.Process.Kill(); cmd.Wait() }(cmd)
	}
	inner := waitChild(t, owned.Process.Pid) // setpriv execs unshare, which forks sleep
	t.Cleanup(func() { waitGone(t, inner) })
	proc := func(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/ns/user" }
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if same, err := Same(proc(sibling.Process.Pid), "/proc/self/ns/user"); err == nil && !same {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the sibling never entered a user namespace of its own")
		}
	}
	hs, err := Open(inner, []Kind{PID})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(hs)
	for _, tc := range []struct {
		what   string
		userns string
		want   bool
	}{
		{"the host's user namespace", "/proc/self/ns/user", true},
		{"the owner", proc(inner), true},
		{"a sibling user namespace", proc(sibling.Process.Pid), false},
	} {
		got, err := CanJoin(hs[0], tc.userns)
		if err != nil || got != tc.want {
			t.Errorf("CanJoin from %s = %v %v, want %v", tc.what, got, err, tc.want)
		}
	}
}
