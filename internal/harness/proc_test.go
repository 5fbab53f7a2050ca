package harness

import (
	"os"
	"os/exec"
	"testing"
	"time"
)

func TestParseShim(t *testing.T) {
	tests := []struct {
		desc string
		args []string
		want shim
		ok   bool
	}{
		{"runc v2 shim", []string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "k8s.io", "-id", "abc", "-address", "/tmp/nst-1/c.sock"},
			shim{namespace: "k8s.io", id: "abc", address: "/tmp/nst-1/c.sock"}, true},
		{"other binary", []string{"/bin/sleep", "-address", "/tmp/nst-1/c.sock"}, shim{}, false},
		{"no address", []string{"containerd-shim-runc-v2", "-id", "abc"}, shim{}, false},
		{"empty", nil, shim{}, false},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := parseShim(tc.args)
			if ok != tc.ok || (ok && got != tc.want) {
				t.Errorf("parseShim = %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestShimSocket(t *testing.T) {
	// sha256 of "/tmp/nst-1/c.sock/k8s.io/abc", as containerd 1.6's shim.SocketAddress.
	s := shim{namespace: "k8s.io", id: "abc", address: "/tmp/nst-1/c.sock"}
	want := "/run/containerd/s/1fe31024c0fb48e15d999aa02f2404df044d830bf793e1f1463f658d48d1d12b"
	if got := s.socket(); got != want {
		t.Errorf("socket = %q, want %q", got, want)
	}
}

func TestProcAliveAndDescendants(t *testing.T) {
	self, err := procOf(os.Getpid())
	if err != nil || !self.Alive() {
		t.Fatalf("self: %+v %v", self, err)
	}
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skipf("skipping: cannot start sleep: %v", err)
	}
	defer cmd.Wait()
	below, err := descendants([]int{os.Getpid()})
	if err != nil {
		t.Fatal(err)
	}
	var child Proc
	for _, p := range below {
		if p.PID == cmd.Process.Pid {
			child = p
		}
	}
	if child.PID == 0 {
		t.Fatalf("descendants of self %v lack child %d", below, cmd.Process.Pid)
	}
	if err := killProcs([]Proc{child}, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	if child.Alive() {
		t.Error("child alive after killProcs")
	}
	if (Proc{PID: self.PID, Start: self.Start + 1}).Alive() {
		t.Error("a proc with another start time counts as alive")
	}
}
