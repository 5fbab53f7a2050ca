//go:build integration

package integration

import (
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// RuntimeConfig through the shim is containerd's own answer, byte for byte.
// Kubernetes 1.38 plans to require it of the runtime (the kubelet takes its
// cgroup driver from it, with no fallback), so a node behind the shim can run
// kubelet 1.38 exactly where containerd can: containerd 2.x answers with its
// cgroup driver (cgroupfs here: the harness sets SystemdCgroup = false),
// 1.6 and 1.7 answer Unimplemented. The shim forwards the method raw; what
// is compared is the marshalled response, or the status (code, message,
// details) as a message, of each side.
func TestRuntimeConfigPassthrough(t *testing.T) {
	s := startShim(t)
	directResp, directErr := direct.Runtime.RuntimeConfig(ctx(t), &runtimeapi.RuntimeConfigRequest{})
	shimResp, shimErr := s.Runtime.RuntimeConfig(ctx(t), &runtimeapi.RuntimeConfigRequest{})
	if d, sh := answerBytes(t, directResp, directErr), answerBytes(t, shimResp, shimErr); d != sh {
		t.Errorf("RuntimeConfig differs through the shim:\n direct: %s\n   shim: %s", describe(directResp, directErr), describe(shimResp, shimErr))
	}

	// And it is what this backend answers, so that equal answers cannot
	// both be some stand-in (the shim's channel to a containerd it never
	// reached, say).
	v, err := direct.Runtime.Version(ctx(t), &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	version := v.GetRuntimeVersion()
	var major int
	if _, err := fmt.Sscanf(strings.TrimPrefix(version, "v"), "%d.", &major); err != nil {
		t.Fatalf("containerd version %q: %v", version, err)
	}
	switch {
	case major >= 2:
		if shimErr != nil {
			t.Fatalf("RuntimeConfig through the shim on containerd %s: %v, want its cgroup driver", version, shimErr)
		}
		if got := shimResp.GetLinux().GetCgroupDriver(); got != runtimeapi.CgroupDriver_CGROUPFS {
			t.Errorf("RuntimeConfig through the shim on containerd %s: cgroup driver %v, want CGROUPFS (the harness's SystemdCgroup = false)", version, got)
		}
	default:
		if status.Code(shimErr) != codes.Unimplemented {
			t.Errorf("RuntimeConfig through the shim on containerd %s: %v, %v; want Unimplemented, as containerd 1.x answers", version, shimResp, shimErr)
		}
	}
	t.Logf("containerd %s: RuntimeConfig through the shim = %s", version, describe(shimResp, shimErr))
}

// answerBytes is a unary call's answer as bytes: the marshalled response,
// or the status as a message (code, message and details).
func answerBytes(t *testing.T, resp proto.Message, err error) string {
	t.Helper()
	m := resp
	prefix := "ok:"
	if err != nil {
		m, prefix = status.Convert(err).Proto(), "status:"
	}
	b, merr := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if merr != nil {
		t.Fatal(merr)
	}
	return prefix + string(b)
}

func describe(resp proto.Message, err error) string {
	if err != nil {
		return err.Error()
	}
	return fmt.Sprintf("%v", resp)
}
