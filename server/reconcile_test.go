package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/intents"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// TestCreateRecordsIntent: the record is on disk while the backend creates
// the container, names the request, and is gone once the answer is ready.
func TestCreateRecordsIntent(t *testing.T) {
	r := newRig(t, false)
	r.addTarget("app", "pod", runtimeapi.ContainerState_CONTAINER_RUNNING)
	var during []intents.Record
	r.backend.onCreate = func() { during = r.intents(t) }
	req := createReq("pod", pidTarget("app"))
	req.Config.Metadata.Attempt = 3
	if _, err := r.create(t, req); err != nil {
		t.Fatal(err)
	}
	if len(during) != 1 || during[0].Sandbox != "pod" || during[0].Name != "debugger" || during[0].Attempt != 3 || during[0].Target != "app" {
		t.Errorf("records while the backend created = %+v, want one for pod/debugger/3 targeting app", during)
	}
	if l := r.intents(t); len(l) != 0 {
		t.Errorf("records after the answer = %+v, want none", l)
	}
	// a create without TARGET writes none
	during = nil
	if _, err := r.create(t, createReq("pod", nil)); err != nil {
		t.Fatal(err)
	}
	if len(during) != 0 {
		t.Errorf("records for a plain create = %+v, want none", during)
	}
}

// TestReconcileRemovesUnfinished: what a crash left (a record with or
// without the backend's id) is removed with its pins; a record of a create
// in flight, and containers no record names, are left alone.
func TestReconcileRemovesUnfinished(t *testing.T) {
	r := newRig(t, false)
	tg := r.server.target.recon
	r.backend.containers = []*runtimeapi.Container{
		{Id: "app", PodSandboxId: "pod", Metadata: &runtimeapi.ContainerMetadata{Name: "app"}},
		{Id: "half", PodSandboxId: "pod", Metadata: &runtimeapi.ContainerMetadata{Name: "debugger", Attempt: 1}},
		{Id: "known", PodSandboxId: "pod", Metadata: &runtimeapi.ContainerMetadata{Name: "debugger2"}},
		{Id: "other-attempt", PodSandboxId: "pod", Metadata: &runtimeapi.ContainerMetadata{Name: "debugger", Attempt: 0}},
		{Id: "flying", PodSandboxId: "pod", Metadata: &runtimeapi.ContainerMetadata{Name: "debugger3"}},
	}
	r.pins.held["known"] = map[namespaces.Kind]string{namespaces.PID: "/pins/known/pid"}
	for _, in := range []intents.Record{
		{ID: "a", Sandbox: "pod", Name: "debugger", Attempt: 1},          // crashed before the backend answered
		{ID: "b", Sandbox: "pod", Name: "debugger2", Container: "known"}, // crashed after
		{ID: "c", Sandbox: "pod", Name: "gone"},                          // the backend never made it
		{ID: "d", Sandbox: "pod", Name: "debugger3"},                     // in flight here
	} {
		if err := tg.intents.Put(in); err != nil {
			t.Fatal(err)
		}
	}
	tg.flights.add("d")
	if err := r.server.Reconcile(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := r.backend.removed; len(got) != 2 || got[0] != "half" || got[1] != "known" {
		t.Errorf("removed %v, want [half known]", got)
	}
	if _, ok := r.pins.held["known"]; ok {
		t.Error("pins of a reconciled container kept")
	}
	if l := r.intents(t); len(l) != 1 || l[0].ID != "d" {
		t.Errorf("records left = %+v, want only the one in flight", l)
	}
}

// TestCallerGivesUp: a caller that gives up after the backend made the
// container does not turn TARGET into an unannotated fallback: the late
// steps run to the end on their own context. One that gives up while the
// backend creates leaves a record, and the reconciler removes what the
// backend made for nobody.
func TestCallerGivesUp(t *testing.T) {
	t.Run("after the backend answered", func(t *testing.T) {
		r := newRig(t, false)
		r.addTarget("app", "pod", runtimeapi.ContainerState_CONTAINER_RUNNING)
		ctx, cancel := context.WithCancel(context.Background())
		r.specs.onEdit = cancel // the caller leaves while the spec is edited
		_, err := runtimeapi.NewRuntimeServiceClient(r.shim).CreateContainer(ctx, createReq("pod", pidTarget("app")))
		if status.Code(err) != codes.Canceled {
			t.Fatalf("CreateContainer = %v, want Canceled (the caller left)", err)
		}
		waitFor(t, "the shim to finish the create", func() bool { return len(r.intents(t)) == 0 && r.pinned("new1") })
		if rec := r.record(t, "new1"); rec.Namespaces["pid"].Result != "targeted" {
			t.Errorf("record = %+v, want pid targeted", rec)
		}
		if len(r.backend.removed) != 0 {
			t.Errorf("removed %v, want the container kept", r.backend.removed)
		}
	})
	t.Run("while the backend creates", func(t *testing.T) {
		r := newRig(t, false)
		r.addTarget("app", "pod", runtimeapi.ContainerState_CONTAINER_RUNNING)
		ctx, cancel := context.WithCancel(context.Background())
		r.backend.onCreate = func() { cancel(); time.Sleep(50 * time.Millisecond) }
		_, err := runtimeapi.NewRuntimeServiceClient(r.shim).CreateContainer(ctx, createReq("pod", pidTarget("app")))
		if status.Code(err) != codes.Canceled {
			t.Fatalf("CreateContainer = %v, want Canceled (the caller left)", err)
		}
		waitFor(t, "the reconciler to remove what the backend made", func() bool { return len(r.intents(t)) == 0 && r.backendContainers() == 1 })
	})
}

// TestDiscardFailureIsReconciled: strict mode must leave nothing behind,
// also when containerd cannot remove the container at once: the failure is
// recorded, and reconciled once containerd answers.
func TestDiscardFailureIsReconciled(t *testing.T) {
	r := newRig(t, true)
	r.addTarget("app", "pod", runtimeapi.ContainerState_CONTAINER_RUNNING)
	r.pins.err = errors.New("pin dir read-only")
	r.backend.removeErr = status.Error(codes.Unavailable, "containerd is down")
	if _, err := r.create(t, createReq("pod", pidTarget("app"))); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("strict create with a failing pin = %v, want FailedPrecondition", err)
	}
	if l := r.intents(t); len(l) != 1 || l[0].Container != "new1" {
		t.Fatalf("records = %+v, want one naming new1, for the reconciler to remove", l)
	}
	r.backend.mu.Lock()
	r.backend.removeErr = nil
	r.backend.mu.Unlock()
	waitFor(t, "the reconciler to remove new1", func() bool { return r.backendContainers() == 1 && len(r.intents(t)) == 0 })
}

// TestReleaseStaleKeepsGoing: one pin that cannot be released does not keep
// the others.
func TestReleaseStaleKeepsGoing(t *testing.T) {
	r := newRig(t, false)
	for _, id := range []string{"a", "b", "c"} {
		r.pins.held[id] = map[namespaces.Kind]string{namespaces.PID: "/pins/" + id + "/pid"}
	}
	r.pins.releaseErr = map[string]error{"b": errors.New("device busy")}
	err := r.server.target.recon.releaseStale(context.Background())
	if err == nil {
		t.Error("ReleaseStale with a stuck pin: no error")
	}
	if _, ok := r.pins.held["b"]; !ok || len(r.pins.held) != 1 {
		t.Errorf("pins left = %v, want only b", r.pins.held)
	}
}

func TestReconcileRetries(t *testing.T) {
	r := newRig(t, false)
	r.backend.containers = []*runtimeapi.Container{{Id: "half", PodSandboxId: "pod", Metadata: &runtimeapi.ContainerMetadata{Name: "debugger"}}}
	if err := r.server.target.recon.intents.Put(intents.Record{ID: "a", Sandbox: "pod", Name: "debugger", Container: "half"}); err != nil {
		t.Fatal(err)
	}
	r.backend.removeErr = status.Error(codes.Unavailable, "containerd is down")
	if err := r.server.Reconcile(context.Background()); err == nil {
		t.Fatal("Reconcile with containerd down: no error")
	}
	r.backend.mu.Lock()
	r.backend.removeErr = nil
	r.backend.mu.Unlock()
	waitFor(t, "the background reconcile to remove the container", func() bool { return r.backendContainers() == 0 && len(r.intents(t)) == 0 })
}

// TestBeginUndone: a record that cannot be written refuses the create
// (FailedPrecondition) and leaves nothing in flight, so that the reconciler
// and the stale-pin sweep are not held off by a create that never began.
func TestBeginUndone(t *testing.T) {
	r := newRig(t, false)
	recon := r.server.target.recon
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	recon.intents = intents.New(filepath.Join(file, "intents")) // under a file: cannot be made
	rec := intents.Record{ID: "r1", Sandbox: "pod", Name: "debugger"}
	if _, err := recon.begin(rec); status.Code(toStatus(err)) != codes.FailedPrecondition {
		t.Fatalf("begin = %v, want FailedPrecondition", err)
	}
	if recon.flights.has(rec.ID) {
		t.Error("a record never written is left in flight")
	}
}

// TestRefusedBeforeForwardLeavesNoRecord: on the Update path a create whose
// preparation fails (containerd unavailable while the target is resolved)
// is refused before anything is forwarded. Its intent record goes at once:
// it is not left to the reconciler, which would look for a container of
// that name and attempt, and could take a retry's for it.
func TestRefusedBeforeForwardLeavesNoRecord(t *testing.T) {
	r := newRig(t, false)
	r.addTarget("app", "pod", runtimeapi.ContainerState_CONTAINER_RUNNING)
	r.backend.mu.Lock()
	r.backend.listErr = status.Error(codes.Unavailable, "containerd is restarting")
	r.backend.mu.Unlock()
	if _, err := r.create(t, createReq("pod", pidTarget("app"))); err == nil {
		t.Fatal("created while the target could not be resolved")
	}
	if n := r.backendCalls("CreateContainer"); n != 0 {
		t.Fatalf("%d creates forwarded, want none", n)
	}
	if l := r.intents(t); len(l) != 0 {
		t.Errorf("records left = %+v, want none: nothing was forwarded", l)
	}
}
