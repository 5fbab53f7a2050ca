package server

import (
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

func TestStartWithLiveTarget(t *testing.T) {
	r := newRig(t, false)
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	id, err := r.create(t, createReq("sb1", pidTarget("app1")))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.start(id); err != nil {
		t.Fatal(err)
	}
	if p := r.nsPath(id, specs.PIDNamespace); p != "/pins/"+id+"/pid" {
		t.Errorf("pid path = %q, want the pin", p)
	}
	if len(r.backend.started) != 1 {
		t.Error("start not forwarded")
	}
}

func TestStartAfterTargetDied(t *testing.T) {
	r := newRig(t, false)
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	id, err := r.create(t, createReq("sb1", pidTarget("app1")))
	if err != nil {
		t.Fatal(err)
	}
	r.live = false
	if err := r.start(id); err != nil {
		t.Fatalf("default mode must fall back at start: %v", err)
	}
	if p := r.nsPath(id, specs.PIDNamespace); p != "/proc/42/ns/pid" {
		t.Errorf("pid path = %q, want the pod's restored", p)
	}
	fb := r.record(t, id).Namespaces["pid"]
	if fb.Result != oci.Fallback || fb.Stage != "start" || !strings.Contains(fb.Reason, "no init") || fb.ReasonKind != string(reasonNamespaceGone) {
		t.Errorf("record = %+v", fb)
	}
	if len(r.backend.started) != 1 {
		t.Error("start not forwarded")
	}
}

func TestStartAfterTargetDiedStrict(t *testing.T) {
	r := newRig(t, true)
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	id, err := r.create(t, createReq("sb1", pidTarget("app1")))
	if err != nil {
		t.Fatal(err)
	}
	r.live = false
	err = r.start(id)
	if status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("strict start: %v, want FailedPrecondition", err)
	}
	if len(r.backend.started) != 0 {
		t.Error("start forwarded in strict mode")
	}
	if len(r.backend.removed) != 1 || len(r.pins.held) != 0 {
		t.Errorf("strict: removed=%v pins=%v, want container and pins gone", r.backend.removed, r.pins.held)
	}
}

// The target exits while the backend starts the container (runc cannot
// fork into a PID namespace whose init is gone): the start fails with the
// cause, FailedPrecondition, not the runtime's Unknown; strict mode also
// removes the container. A start that fails while the target lives is the
// backend's answer, unchanged.
func TestStartTargetExitsDuringStart(t *testing.T) {
	runcErr := status.Error(codes.Unknown, "failed to create containerd task: runc create failed: unable to spawn stage-2: Cannot allocate memory")
	for _, tc := range []struct {
		desc        string
		strict      bool
		targetExits bool
		code        codes.Code
		removed     int
	}{
		{"target exits, default", false, true, codes.FailedPrecondition, 0},
		{"target exits, strict", true, true, codes.FailedPrecondition, 1},
		{"target lives: the backend's error", false, false, codes.Unknown, 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := newRig(t, tc.strict)
			r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
			id, err := r.create(t, createReq("sb1", pidTarget("app1")))
			if err != nil {
				t.Fatal(err)
			}
			r.backend.mu.Lock()
			r.backend.onStart = func(string) error {
				r.live = !tc.targetExits
				return runcErr
			}
			r.backend.mu.Unlock()
			err = r.start(id)
			if status.Code(err) != tc.code {
				t.Fatalf("start = %v, want %s", err, tc.code)
			}
			if tc.targetExits && !strings.Contains(err.Error(), "exited while debugger started") {
				t.Errorf("start = %v, want the cause in words", err)
			}
			if tc.code == codes.Unknown && status.Convert(err).Message() != status.Convert(runcErr).Message() {
				t.Errorf("start = %v, want the backend's own answer %v", err, runcErr)
			}
			if len(r.backend.removed) != tc.removed {
				t.Errorf("removed %v, want %d", r.backend.removed, tc.removed)
			}
		})
	}
}

func TestStartUntargetedIsUntouched(t *testing.T) {
	r := newRig(t, true)
	r.live = false
	if err := r.start("plain"); err != nil {
		t.Fatal(err)
	}
	if len(r.specs.specs) != 0 {
		t.Error("spec of an untargeted container edited")
	}
}

// TestStartWithPrefix: an id typed as a unique prefix (crictl start 4f2a) is
// resolved before the pin check, which a prefix would otherwise skip.
func TestStartWithPrefix(t *testing.T) {
	r := newRig(t, false)
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	id, err := r.create(t, createReq("sb1", pidTarget("app1")))
	if err != nil {
		t.Fatal(err)
	}
	r.live = false
	if err := r.start(id[:len(id)-1]); err != nil {
		t.Fatal(err)
	}
	if fb := r.record(t, id).Namespaces["pid"]; fb.Result != oci.Fallback || fb.Stage != "start" {
		t.Errorf("started by prefix after the target died: record = %+v, want a fallback at start", fb)
	}
}
