//go:build integration

package integration

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/support"
)

// cri-nstarget check against the harness's real containerd: it reaches
// containerd on both sockets and judges its version by the support window
// (ok in it, warn for a best-effort line, fail outside), and exits 0 unless
// a line failed.
func TestCheckCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, err := runtimeapi.NewRuntimeServiceClient(directConn).Version(ctx, &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatalf("containerd's CRI Version: %v", err)
	}
	c := env.Containerd
	cmd := exec.CommandContext(ctx, shimBin, "check", "--config=", "--runtime-endpoint", c.Endpoint(), "--containerd-address", c.Address(),
		"--nri-socket", c.NRISocket(), "--listen", "unix://"+filepath.Join(tmp, "check", "cri.sock"), "--timeout", "10s")
	out, err := cmd.Output()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		t.Fatalf("cri-nstarget check: %v", err)
	}
	t.Logf("cri-nstarget check (exit %d):\n%s", code, out)
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	has := func(prefix string) bool {
		for _, l := range lines {
			if strings.HasPrefix(l, prefix) {
				return true
			}
		}
		return false
	}
	if want := "ok: runtime_endpoint " + c.Endpoint() + " answers: containerd " + v.RuntimeVersion; !has(want) {
		t.Errorf("no line %q", want)
	}
	level, wantCode := "fail", 1
	if l, ok := support.LineOf(v.RuntimeVersion); ok && l.Status == support.Supported {
		level, wantCode = "ok", 0
	} else if ok {
		level, wantCode = "warn", 0
	}
	if want := level + ": containerd " + v.RuntimeVersion + " (at " + c.Address() + "): "; !has(want) {
		t.Errorf("no line %q", want)
	}
	if has("fail: ") != (wantCode == 1) || code != wantCode {
		t.Errorf("exit %d, want %d (fail lines only outside the window)", code, wantCode)
	}
}
