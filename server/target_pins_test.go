package server

import (
	"errors"
	"maps"
	"testing"

	"github.com/sirupsen/logrus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
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

// The pins of one create: taken in one step per container (the
// namespaces, then the /dev/shm, whose failure leaves the namespaces), the
// same container's again answered as held, marked in flight until the one
// undo, which releases every container's but the one kept.
func TestCreatePins(t *testing.T) {
	store := &fakePins{held: map[string]map[namespaces.Kind]string{}}
	var inFlight flights
	pins := &createPins{store: store, inFlight: &inFlight, log: logrus.NewEntry(logrus.New())}
	pid := &namespaces.Handle{Kind: namespaces.PID}
	ipc := &namespaces.Handle{Kind: namespaces.IPC}
	shm := &namespaces.Handle{Kind: namespaces.Shm}

	paths, nsErr, shmErr := pins.take("made", []*namespaces.Handle{pid, ipc}, shm)
	if nsErr != nil || shmErr != nil || paths[namespaces.PID] != "/pins/made/pid" || paths[namespaces.Shm] != "/pins/made/shm" {
		t.Fatalf("take = %v, %v, %v", paths, nsErr, shmErr)
	}
	again, _, _ := pins.take("made", []*namespaces.Handle{pid, ipc}, shm)
	if !maps.Equal(again, paths) || !inFlight.has("made") {
		t.Errorf("taken again: %v, in flight %v; want what is held, marked", again, inFlight.has("made"))
	}
	store.err = errors.New("mount: operation not permitted")
	if _, nsErr, _ := pins.take("refused", []*namespaces.Handle{pid}, nil); nsErr == nil {
		t.Error("a failing pin store answered no error")
	}
	store.err = nil
	pins.take("other", []*namespaces.Handle{pid}, nil)

	pins.keep("made")
	pins.release()
	if _, ok := store.held["made"]; !ok || len(store.held) != 1 {
		t.Errorf("after the undo the store holds %v, want the kept container's alone", store.held)
	}
	for _, id := range []string{"made", "refused", "other"} {
		if inFlight.has(id) {
			t.Errorf("%s still marked in flight after the undo", id)
		}
	}
}
