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
