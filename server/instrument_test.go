package server

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A panic in a handler becomes Internal for that call; the shim keeps serving.
func TestPanicIsContained(t *testing.T) {
	r := newRig(t, false)
	r.kernel.hasInit = func(string) (bool, error) { panic("boom") }
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

// Every call, passed through or intercepted, is reported once with its
// method and final code.
func TestCallMetrics(t *testing.T) {
	m := &fakeMetrics{}
	r := newRig(t, false, withMetrics(m))
	rt := runtimeapi.NewRuntimeServiceClient(r.shim)
	rt.Version(context.Background(), &runtimeapi.VersionRequest{})
	rt.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: "x"})
	r.create(t, createReq("sb1", pidTarget("ghost")))
	want := []string{
		"/runtime.v1.RuntimeService/ContainerStatus NotFound",
		"/runtime.v1.RuntimeService/CreateContainer NotFound",
		"/runtime.v1.RuntimeService/Version OK",
	}
	// observe runs after the response is sent: wait for it.
	waitFor(t, fmt.Sprintf("the calls reported to be %q", want), func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return slices.Equal(slices.Sorted(slices.Values(m.calls)), want)
	})
}
