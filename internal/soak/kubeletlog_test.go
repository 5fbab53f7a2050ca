package soak

import (
	"os"
	"path/filepath"
	"testing"
)

func TestKubeletCode(t *testing.T) {
	log := `I1127 09:00:00.000000    1 kubelet.go:1] "SyncLoop ADD"
E1127 09:00:01.000000    1 remote_runtime.go:498] "CreateContainer in sandbox from runtime service failed" err="rpc error: code = FailedPrecondition desc = cri-nstarget: target container \"app\" is not running" podSandboxID="abc"
E1127 09:00:02.000000    1 remote_runtime.go:498] "CreateContainer in sandbox from runtime service failed" err="rpc error: code = Unavailable desc = connection error: desc = \"transport: Error while dialing\"" podSandboxID="abc"
E1127 09:00:03.000000    1 remote_runtime.go:498] "StartContainer from runtime service failed" err="rpc error: code = Unknown desc = failed to create containerd task: boom" containerID="def"
`
	p := filepath.Join(t.TempDir(), "kubelet.log")
	if err := os.WriteFile(p, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ msg, want string }{
		{`cri-nstarget: target container "app" is not running`, "FailedPrecondition"},
		{`connection error: desc = "transport: Error while dialing"`, "Unavailable"},
		{"failed to create containerd task: boom", "Unknown"},
		{"never logged at all, this one", ""},
		{"short", ""},
	} {
		if got := kubeletCode(p, tc.msg); got != tc.want {
			t.Errorf("kubeletCode(%q) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

func TestKubeletStartCode(t *testing.T) {
	log := `E1127 09:15:18.968287    1 remote_runtime.go:523] "StartContainer from runtime service failed" err="rpc error: code = FailedPrecondition desc = container dbg-45 could not start" containerID="2a10"
E1127 09:15:19.968287    1 remote_runtime.go:523] "StartContainer from runtime service failed" err="rpc error: code = Unknown desc = runc: procReady not received" containerID="7836"
`
	p := filepath.Join(t.TempDir(), "kubelet.log")
	if err := os.WriteFile(p, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]string{"2a10": "FailedPrecondition", "7836": "Unknown", "2a1": "", "9999": ""} {
		if got := kubeletStartCode(p, id); got != want {
			t.Errorf("kubeletStartCode(%s) = %q, want %q", id, got, want)
		}
	}
}
