//go:build integration

package integration

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// (c) Requests the shim refuses: each gets its code, and containerd's
// container list is the same after as before.
func TestRefusals(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(map[bool]string{false: "default", true: "strict"}[strict], func(t *testing.T) {
			c := shimCRI(startShimStrict(t, strict))
			p1 := runPod(t, c, ownMode)
			p2 := runPod(t, c, ownMode)
			app := run(t, c, p1, "app", pidOwn)
			for _, tc := range []struct {
				desc string
				ns   *runtimeapi.NamespaceOption
				code codes.Code
			}{
				{"target in another pod", targetOf(app), codes.FailedPrecondition},
				{"unknown target", targetOf("0123456789abcdef"), codes.NotFound},
				{"target is a sandbox", targetOf(p1.id), codes.NotFound},
				{"no target_id", targetOf(""), codes.InvalidArgument},
				{"path as target", targetOf("../../proc/self"), codes.InvalidArgument},
				{"NUL in target", targetOf("ab\x00cd"), codes.InvalidArgument},
				{"long target", targetOf(strings.Repeat("f", 4096)), codes.InvalidArgument},
				{"network TARGET", &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_TARGET, TargetId: app}, codes.InvalidArgument},
			} {
				t.Run(tc.desc, func(t *testing.T) {
					before := containerIDs(t)
					in := p2
					if tc.code != codes.FailedPrecondition {
						in = p1
					}
					_, err := createIn(t, c, in, "debug", tc.ns)
					if status.Code(err) != tc.code {
						t.Fatalf("CreateContainer: %v, want %v", err, tc.code)
					}
					if after := containerIDs(t); len(after) != len(before) {
						t.Errorf("containerd has %d containers after the refusal, %d before", len(after), len(before))
					}
				})
			}
		})
	}
}

// An unknown NamespaceMode value: the default shim runs the container in the
// pod's namespace and records why; a strict one refuses it.
func TestUnknownNamespaceMode(t *testing.T) {
	c := shimCRI(startShim(t))
	p := runPod(t, c, ownMode)
	id := run(t, c, p, "odd", &runtimeapi.NamespaceOption{Pid: 7})
	if got, want := nsInside(t, c, id, "pid"), nsOfPid(t, sandboxPid(t, p.id), "pid"); got != want {
		t.Errorf("pid namespace %s, want the pod's %s", got, want)
	}
	if r := direct.Info(t, id).Record(t).Namespaces["pid"]; !strings.Contains(r.Reason, "unknown NamespaceMode 7") {
		t.Errorf("record = %+v", r)
	}

	strict := shimCRI(startShimStrict(t, true))
	before := containerIDs(t)
	if _, err := createIn(t, strict, p, "odd2", &runtimeapi.NamespaceOption{Pid: 7}); status.Code(err) != codes.InvalidArgument {
		t.Errorf("strict: %v, want InvalidArgument", err)
	}
	if len(containerIDs(t)) != len(before) {
		t.Error("strict: a container was left behind")
	}
}
