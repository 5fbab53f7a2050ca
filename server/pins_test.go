package server

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestPinCounts(t *testing.T) {
	r := newRig(t, false)
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	both := &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, Ipc: runtimeapi.NamespaceMode_TARGET, TargetId: "app1"}
	for range 2 {
		if _, err := r.create(t, createReq("sb1", both)); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.create(t, createReq("sb1", pidTarget("app1"))); err != nil {
		t.Fatal(err)
	}
	n, err := r.server.PinCounts()
	if err != nil || n["pid"] != 3 || n["ipc"] != 2 {
		t.Errorf("PinCounts = %v, %v; want pid 3, ipc 2", n, err)
	}
}
