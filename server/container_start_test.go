package server

import (
	"context"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

func (r *rig) start(id string) error {
	_, err := runtimeapi.NewRuntimeServiceClient(r.shim).StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id})
	return err
}

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
	if fb.Result != oci.Fallback || fb.Stage != "start" || !strings.Contains(fb.Reason, "no init") {
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

func TestRemoveReleasesPins(t *testing.T) {
	r := newRig(t, false)
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt := runtimeapi.NewRuntimeServiceClient(r.shim)
	a, _ := r.create(t, createReq("sb1", pidTarget("app1")))
	b, _ := r.create(t, createReq("sb1", pidTarget("app1")))
	if len(r.pins.held) != 2 {
		t.Fatalf("pins = %v", r.pins.held)
	}
	if _, err := rt.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: a}); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.pins.held[a]; ok || len(r.pins.held) != 1 {
		t.Errorf("after RemoveContainer(%s): pins = %v", a, r.pins.held)
	}
	if _, err := rt.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: "sb1"}); err != nil {
		t.Fatal(err)
	}
	if _, ok := r.pins.held[b]; ok {
		t.Errorf("after RemovePodSandbox: pins = %v", r.pins.held)
	}
}

// TestPinDirRefusesPaths: ids reach the pin store from clients; none may
// name a path outside the pin directory.
func TestPinDirRefusesPaths(t *testing.T) {
	dir := t.TempDir()
	p := pinDir{dir: dir + "/pins"}
	for _, id := range []string{"..", "../x", "/etc", "a/b", "", "a\x00b"} {
		if _, ok := p.containerDir(id); ok {
			t.Errorf("containerDir(%q) accepted", id)
		}
		if err := p.Release(id); err != nil {
			t.Errorf("Release(%q): %v", id, err)
		}
		if err := p.Hold(id, nil); err == nil {
			t.Errorf("Hold(%q) accepted", id)
		}
	}
	if ids, err := p.IDs(); err != nil || len(ids) != 0 {
		t.Errorf("IDs of a missing dir = %v %v", ids, err)
	}
}

// A panic in a handler becomes Internal for that call; the shim keeps serving.
func TestPanicIsContained(t *testing.T) {
	r := newRig(t, false)
	r.server.hasInit = func(string) (bool, error) { panic("boom") }
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	id, err := r.create(t, createReq("sb1", pidTarget("app1")))
	if err != nil {
		t.Fatal(err)
	}
	if err := r.start(id); status.Code(err) != codes.Internal {
		t.Errorf("start = %v, want Internal", err)
	}
	if _, err := runtimeapi.NewRuntimeServiceClient(r.shim).Version(context.Background(), &runtimeapi.VersionRequest{}); err != nil {
		t.Errorf("shim stopped serving after a panic: %v", err)
	}
}
