package server

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/nriplugin"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// Through NRI the create is pointed at the pins by the event's answer: the
// adjustment holds the pin and the record, and no spec is edited after.
func TestCreateViaNRI(t *testing.T) {
	r := newNRIRig(t, false)
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	id, err := r.create(t, createReq("sb1", pidTarget("app1")))
	if err != nil {
		t.Fatal(err)
	}
	adj := r.adjusted[id]
	if adj == nil || len(adj.GetLinux().GetNamespaces()) != 1 || adj.GetLinux().GetNamespaces()[0].GetPath() != "/pins/"+id+"/pid" {
		t.Fatalf("adjustment %v, want the pid namespace at the pin", adj)
	}
	if rec := r.record(t, id); rec.Via != ViaNRI || rec.Namespaces["pid"].Result != oci.Targeted {
		t.Errorf("record in the adjustment: %+v", rec)
	}
	if n := r.specs.edits; n != 0 {
		t.Errorf("the spec was edited %d times after create: the NRI path writes none", n)
	}
	if !r.pinned(id) {
		t.Error("no pins")
	}
	if got := r.backend.created[0].GetConfig().GetAnnotations()[nriplugin.AnnotationRequest]; got == "" {
		t.Error("the forwarded request carries no token")
	}
}

// The backend fails the create after the event was answered: the pins made
// for the container that never was are released.
func TestCreateViaNRIBackendFailsAfterTheEvent(t *testing.T) {
	r := newNRIRig(t, false)
	r.nriFail = status.Error(codes.Unknown, "runc create failed")
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	if _, err := r.create(t, createReq("sb1", pidTarget("app1"))); status.Code(err) != codes.Unknown {
		t.Fatalf("create = %v, want the backend's error", err)
	}
	if r.pinned("new1") {
		t.Error("pins left for a container the backend did not make")
	}
}

// The event never reaches the shim (the connection dropped before it, or
// containerd went on without the plugin): the Update path points the spec.
func TestCreateNRIEventMissed(t *testing.T) {
	r := newNRIRig(t, false)
	r.backend.nri = nil // containerd sends no event
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	id, err := r.create(t, createReq("sb1", pidTarget("app1")))
	if err != nil {
		t.Fatal(err)
	}
	if rec := r.record(t, id); rec.Via != ViaUpdate || rec.Namespaces["pid"].Result != oci.Targeted || r.nsPath(id, specs.PIDNamespace) != "/pins/"+id+"/pid" {
		t.Errorf("record %+v, pid path %q: want targeted through the Update path", rec, r.nsPath(id, specs.PIDNamespace))
	}
}

// The runtime refuses namespace adjustments (NRI's default validator, by
// configuration): containerd fails the create, which made nothing; the shim
// creates again through the Update path, and takes it from then on.
func TestCreateNRIRefusedByTheRuntime(t *testing.T) {
	r := newNRIRig(t, false, adaptation.WithDefaultValidator(&validatorConfig{Enable: true, RejectNamespaceAdjustment: true}))
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	for i := range 2 {
		id, err := r.create(t, createReq("sb1", pidTarget("app1")))
		if err != nil {
			t.Fatal(err)
		}
		if rec := r.record(t, id); rec.Via != ViaUpdate || rec.Namespaces["pid"].Result != oci.Targeted || r.nsPath(id, specs.PIDNamespace) != "/pins/"+id+"/pid" {
			t.Errorf("create %d: record %+v: want targeted through the Update path", i, rec)
		}
		if !r.pinned(id) {
			t.Errorf("create %d: no pins", i)
		}
	}
	if n := r.createdCount(); n != 2 {
		t.Errorf("backend made %d containers, want 2", n)
	}
	if n := len(r.backend.createdRaw); n != 3 {
		t.Errorf("backend received %d creates, want 3: the first refused, then each through the Update path", n)
	}
	if usable, why := r.server.nri.Usable(); usable {
		t.Errorf("NRI still used after the runtime refused it (%s)", why)
	}
}

// Another NRI plugin sets the pid namespace too: NRI fails the create, the
// other plugin wins, and the shim's answer to the second try's event is the
// record alone, saying why (strict: refused).
func TestCreateNRIConflictWithAnotherPlugin(t *testing.T) {
	for _, strict := range []bool{false, true} {
		r := newNRIRig(t, strict)
		otherPlugin(t, r, "pid")
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		id, err := r.create(t, createReq("sb1", pidTarget("app1")))
		if strict {
			if status.Code(err) != codes.FailedPrecondition || r.createdCount() != 0 {
				t.Errorf("strict: %v, %d made; want FailedPrecondition and none", err, r.createdCount())
			}
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		rec := r.record(t, id)
		if pid := rec.Namespaces["pid"]; pid.Result != oci.Fallback || pid.ReasonKind != string(reasonNRIConflict) {
			t.Errorf("pid record %+v, want a fallback for the conflict", pid)
		}
		// the second try's event answered it, with the record: no spec
		// written through containerd's API after the create
		if rec.Via != ViaNRI || r.specs.edits != 0 {
			t.Errorf("record written via %q, %d spec edits; want via NRI, none", rec.Via, r.specs.edits)
		}
		if got := r.nsPath(id, specs.PIDNamespace); got != "/proc/other/ns/pid" {
			t.Errorf("pid path %q, want the other plugin's", got)
		}
		if r.pinned(id) {
			t.Error("pins kept for a container that joins none")
		}
	}
}

// Pins made in the NRI event belong to a container the backend does not
// list until its create returns: a stale-pin sweep meanwhile (another pod's
// RemovePodSandbox, say) must leave them.
func TestCreateViaNRIPinsSurviveASweep(t *testing.T) {
	r := newNRIRig(t, false)
	var sweepErr error
	r.backend.nri = func(id string, req *runtimeapi.CreateContainerRequest) error {
		if err := r.nriEvent(id, req); err != nil {
			return err
		}
		sweepErr = r.server.target.recon.releaseStale(context.Background())
		return nil
	}
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	id, err := r.create(t, createReq("sb1", pidTarget("app1")))
	if err != nil || sweepErr != nil {
		t.Fatalf("create: %v; sweep: %v", err, sweepErr)
	}
	if !r.pinned(id) {
		t.Error("the sweep released the pins of a create in flight")
	}
	if r.server.target.recon.pinning.has(id) {
		t.Error("still marked in flight after the create returned")
	}
}

// On the NRI path the request is forwarded as soon as the intent is
// recorded: the target is resolved, and its namespaces opened, while
// containerd creates the container, and the event's answer waits for that.
// Here the target's pid is not known until containerd has the request.
func TestCreateViaNRIPreparesWhileContainerdCreates(t *testing.T) {
	r := newNRIRig(t, false)
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	forwarded := make(chan struct{})
	r.tasks.answer = func() (uint32, error) {
		select {
		case <-forwarded:
			return 4242, nil
		case <-time.After(5 * time.Second):
			return 0, errors.New("the request was not forwarded while the target was resolved")
		}
	}
	r.backend.nri = func(id string, req *runtimeapi.CreateContainerRequest) error {
		close(forwarded)
		return r.nriEvent(id, req)
	}
	id, err := r.create(t, createReq("sb1", pidTarget("app1")))
	if err != nil {
		t.Fatal(err)
	}
	if rec := r.record(t, id); rec.Via != ViaNRI || rec.Namespaces["pid"].Result != oci.Targeted {
		t.Errorf("record %+v, want targeted through NRI", rec)
	}
}

// A fallback on the NRI path is answered in NRI, with its record, as a
// targeted create is: no spec Update follows, and nothing is pinned.
func TestCreateViaNRIFallbackAnsweredInNRI(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		state runtimeapi.ContainerState
		ns    *runtimeapi.NamespaceOption
		kind  string
		why   reasonKind
	}{
		{"target exited", runtimeapi.ContainerState_CONTAINER_EXITED, pidTarget("app1"), "pid", reasonTargetNotRunning},
		{"unknown mode", runtimeapi.ContainerState_CONTAINER_RUNNING, &runtimeapi.NamespaceOption{Ipc: 9}, "ipc", reasonUnknownMode},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := newNRIRig(t, false)
			r.addTarget("app1", "sb1", tc.state)
			id, err := r.create(t, createReq("sb1", tc.ns))
			if err != nil {
				t.Fatal(err)
			}
			rec := r.record(t, id)
			if ns := rec.Namespaces[tc.kind]; rec.Via != ViaNRI || ns.Result != oci.Fallback || ns.ReasonKind != string(tc.why) {
				t.Errorf("record %+v, want a fallback (%s) written through NRI", rec, tc.why)
			}
			if r.adjusted[id] == nil || r.specs.edits != 0 {
				t.Errorf("adjusted %v, %d spec edits: want the record in the NRI answer, and no Update", r.adjusted[id], r.specs.edits)
			}
			if len(r.pins.held) != 0 {
				t.Errorf("pins held: %v", r.pins.held)
			}
		})
	}
}

// The answer refuses the create when the target cannot be resolved, or
// strict mode refuses it: containerd makes nothing, and the caller gets the
// shim's own status and message, not containerd's wrapping of them. Where
// containerd fails the create before it asks the shim (a name already
// reserved, say), the request's own fault still comes first, as when the
// shim prepared before forwarding; where containerd makes the container
// without asking (the event missed), it is removed.
func TestCreateViaNRIRefusals(t *testing.T) {
	nameReserved := status.Error(codes.AlreadyExists, `failed to reserve container name "debugger"`)
	for _, tc := range []struct {
		desc    string
		strict  bool
		target  string
		state   runtimeapi.ContainerState
		backend string // "event": containerd asks the shim; "fails first": fails before; "no event": makes it without asking
		code    codes.Code
		msg     string
	}{
		{"unknown target", false, "ghost", runtimeapi.ContainerState_CONTAINER_RUNNING, "event", codes.NotFound, `target container "ghost" not found`},
		{"target exited, strict", true, "app1", runtimeapi.ContainerState_CONTAINER_EXITED, "event", codes.FailedPrecondition, "strict targeting: container debugger cannot join the pid namespace of target container app: app is not running"},
		{"unknown target, containerd fails first", false, "ghost", runtimeapi.ContainerState_CONTAINER_RUNNING, "fails first", codes.NotFound, `target container "ghost" not found`},
		{"running target, containerd fails first", false, "app1", runtimeapi.ContainerState_CONTAINER_RUNNING, "fails first", codes.AlreadyExists, "reserve container name"},
		{"unknown target, the event missed", false, "ghost", runtimeapi.ContainerState_CONTAINER_RUNNING, "no event", codes.NotFound, `target container "ghost" not found`},
		{"target exited, strict, the event missed", true, "app1", runtimeapi.ContainerState_CONTAINER_EXITED, "no event", codes.FailedPrecondition, "app is not running"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := newNRIRig(t, tc.strict)
			r.addTarget("app1", "sb1", tc.state)
			switch tc.backend {
			case "fails first":
				r.backend.nri = func(string, *runtimeapi.CreateContainerRequest) error { return nameReserved }
			case "no event":
				r.backend.nri = nil
			}
			_, err := r.create(t, createReq("sb1", pidTarget(tc.target)))
			if st := status.Convert(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) || strings.Contains(st.Message(), "NRI adjustment") {
				t.Fatalf("create = %v, want %v saying %q, in the shim's words", err, tc.code, tc.msg)
			}
			if n := r.backendContainers(); n != 1 {
				t.Errorf("the backend holds %d containers, want the target alone", n)
			}
			if len(r.pins.held) != 0 || len(r.intents(t)) != 0 {
				t.Errorf("pins %v, intent records %v left", r.pins.held, r.intents(t))
			}
		})
	}
}
