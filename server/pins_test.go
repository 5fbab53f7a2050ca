package server

import (
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

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
