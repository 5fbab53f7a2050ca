//go:build integration

package integration

import (
	"bytes"
	"context"
	"strings"
	"syscall"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// rawBytes sends and receives messages as the bytes given, so a test can put
// on the wire what a well-behaved client cannot (invalid UTF-8, broken
// protobuf).
type rawBytes struct{}

func (rawBytes) Name() string { return "proto" }
func (rawBytes) Marshal(v any) ([]byte, error) {
	return *(v.(*[]byte)), nil
}
func (rawBytes) Unmarshal(b []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), b...)
	return nil
}

// Hostile CreateContainer requests: each gets its code, nothing is created
// in containerd, and the shim neither panics nor stops serving.
func TestHostileInput(t *testing.T) {
	s := startShim(t)
	c := shimCRI(s)
	p1, p2 := runPod(t, c, ownMode), runPod(t, c, ownMode)
	app := run(t, c, p1, "app", pidOwn)
	pid := s.PID()

	req := func(p pod, ns *runtimeapi.NamespaceOption) *runtimeapi.CreateContainerRequest {
		return &runtimeapi.CreateContainerRequest{PodSandboxId: p.id, SandboxConfig: p.cfg, Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "hostile"}, Image: &runtimeapi.ImageSpec{Image: env.BusyboxImage},
			Command: []string{"sleep", "60"},
			Linux:   &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}},
		}}
	}
	marshal := func(r *runtimeapi.CreateContainerRequest) []byte {
		b, err := proto.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// a target_id that is not UTF-8: marshal a placeholder, then swap bytes
	nonUTF8 := bytes.Replace(marshal(req(p1, targetOf("PLACEHOLDER"))), []byte("PLACEHOLDER"), []byte("abc\xff\xfe\xfddef"), 1)
	huge := req(p1, &runtimeapi.NamespaceOption{})
	huge.Config.Annotations = map[string]string{"x": strings.Repeat("x", 17<<20)}

	cases := []struct {
		desc string
		body []byte
		code codes.Code
	}{
		{"slash", marshal(req(p1, targetOf("a/b"))), codes.InvalidArgument},
		{"dot dot", marshal(req(p1, targetOf(".."))), codes.InvalidArgument},
		{"NUL", marshal(req(p1, targetOf("a\x00b"))), codes.InvalidArgument},
		{"1 MiB target_id", marshal(req(p1, targetOf(strings.Repeat("a", 1<<20)))), codes.InvalidArgument},
		{"non-UTF-8 target_id", nonUTF8, codes.InvalidArgument},
		{"TARGET without target_id", marshal(req(p1, targetOf(""))), codes.InvalidArgument},
		{"TARGET for network", marshal(req(p1, &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_TARGET, TargetId: app})), codes.InvalidArgument},
		{"TARGET for all three", marshal(req(p1, &runtimeapi.NamespaceOption{Pid: 3, Ipc: 3, Network: 3, TargetId: app})), codes.InvalidArgument},
		{"target in another sandbox", marshal(req(p2, targetOf(app))), codes.FailedPrecondition},
		{"target is a sandbox", marshal(req(p1, targetOf(p1.id))), codes.NotFound},
		{"unknown target", marshal(req(p1, targetOf("deadbeef"))), codes.NotFound},
		{"oversized message", marshal(huge), codes.ResourceExhausted},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			before := containerIDs(t)
			var out []byte
			in := tc.body
			err := s.Conn.Invoke(ctx(t), "/runtime.v1.RuntimeService/CreateContainer", &in, &out,
				grpc.ForceCodec(rawBytes{}), grpc.MaxCallSendMsgSize(64<<20))
			if status.Code(err) != tc.code {
				t.Errorf("code = %v (%v), want %v", status.Code(err), err, tc.code)
			}
			if after := containerIDs(t); len(after) != len(before) {
				t.Errorf("containerd has %d containers after, %d before", len(after), len(before))
			}
		})
	}

	// Unknown NamespaceMode values are not refused by default, only in strict
	// mode; see TestUnknownNamespaceMode. Broken bytes get containerd's own
	// answer, the same as directly: on a passthrough method, and on the
	// intercepted ones, which forward what they cannot read as it came.
	garbage := []byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}
	for _, method := range []string{"ContainerStatus", "CreateContainer", "StartContainer", "RemoveContainer"} {
		before := containerIDs(t)
		var a, b []byte
		errDirect := directConn.Invoke(ctx(t), "/runtime.v1.RuntimeService/"+method, &garbage, &a, grpc.ForceCodec(rawBytes{}))
		errShim := s.Conn.Invoke(ctx(t), "/runtime.v1.RuntimeService/"+method, &garbage, &b, grpc.ForceCodec(rawBytes{}))
		if errShim == nil || status.Code(errDirect) != status.Code(errShim) || status.Convert(errDirect).Message() != status.Convert(errShim).Message() {
			t.Errorf("broken %s: direct %v, shim %v", method, errDirect, errShim)
		}
		if after := containerIDs(t); len(after) != len(before) {
			t.Errorf("broken %s: containerd has %d containers after, %d before", method, len(after), len(before))
		}
	}

	if s.PID() != pid || syscall.Kill(pid, 0) != nil {
		t.Fatal("the shim process changed or died")
	}
	if _, err := c.Runtime.Version(context.Background(), &runtimeapi.VersionRequest{}); err != nil {
		t.Errorf("shim stopped serving: %v", err)
	}
	t.Logf("%d hostile requests refused with the expected codes; shim pid %d still serving", len(cases)+1, pid)
}
