package server

import (
	"context"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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

// TestRemoveWithPrefix: a unique prefix releases the full id's pins; an
// ambiguous one releases none.
func TestRemoveWithPrefix(t *testing.T) {
	r := newRig(t, false)
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	rt := runtimeapi.NewRuntimeServiceClient(r.shim)
	a, _ := r.create(t, createReq("sb1", pidTarget("app1")))
	b, _ := r.create(t, createReq("sb1", pidTarget("app1")))
	if _, err := rt.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: "new"}); err != nil {
		t.Fatal(err)
	}
	if len(r.pins.held) != 2 {
		t.Errorf("after removing the ambiguous prefix \"new\": pins = %v, want both kept", r.pins.held)
	}
	if _, err := rt.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: a}); err != nil {
		t.Fatal(err)
	}
	r.backend.mu.Lock()
	r.backend.containers = r.backend.containers[:1] // only app1 and b are left: make b's prefix unique
	r.backend.containers = append(r.backend.containers, &runtimeapi.Container{Id: b, PodSandboxId: "sb1"})
	r.backend.mu.Unlock()
	if _, err := rt.RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: b[:2]}); err != nil {
		t.Fatal(err)
	}
	if len(r.pins.held) != 0 {
		t.Errorf("after removing both, the second by the prefix %q: pins = %v", b[:2], r.pins.held)
	}
}
