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
