package namespaces

import (
	"errors"
	"os"
	"os/exec"
	"testing"
)

func TestOfOwnProcess(t *testing.T) {
	ids, err := Of(os.Getpid(), []Kind{PID, IPC})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []Kind{PID, IPC} {
		want, err := Stat("/proc/self/ns/" + string(k))
		if err != nil {
			t.Fatal(err)
		}
		if ids[k] != want {
			t.Errorf("%s = %v, want %v", k, ids[k], want)
		}
	}
}

// A pid whose process has exited and been reaped names nothing: Of fails
// with ErrExited rather than read whatever holds the pid next.
func TestOfExitedProcess(t *testing.T) {
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	if _, err := Of(cmd.Process.Pid, []Kind{PID}); !errors.Is(err, ErrExited) {
		t.Errorf("err = %v, want ErrExited", err)
	}
	if _, err := Of(0, []Kind{PID}); err == nil {
		t.Error("pid 0 accepted")
	}
}

// A process reaped while its namespaces are read may have left its pid to
// another process, whose namespaces the read may have seen: the pidfd,
// asked after the read, says so, and Of fails closed with ErrExited.
func TestOfReapedDuringRead(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { ofAfterRead = nil }()
	ofAfterRead = func(int) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait() // reaped: the pid is free for another process
	}
	if ids, err := Of(cmd.Process.Pid, []Kind{PID}); !errors.Is(err, ErrExited) {
		t.Errorf("Of = %v, %v; want ErrExited", ids, err)
	}
}
