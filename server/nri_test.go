package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

func testNRIPlugin(t *testing.T) *nriPlugin {
	t.Helper()
	p := newNRIPlugin("/nonexistent/nri.sock", logrus.NewEntry(logrus.StandardLogger()), nil)
	p.set(true, "test: connected")
	return p
}

func nriContainer(id, sandbox, name, token string) *api.Container {
	c := &api.Container{Id: id, PodSandboxId: sandbox, Name: name}
	if token != "" {
		c.Annotations = map[string]string{annotationRequest: token}
	}
	return c
}

// The event of a container whose request the shim forwarded with a token
// gets that request's adjustment, once; any other container (no token, an
// unknown one, a token whose sandbox or name do not match) gets none.
func TestNRIEventsGetOnlyTheirAdjustment(t *testing.T) {
	p := testNRIPlugin(t)
	calls := 0
	adj := &api.ContainerAdjustment{}
	adj.AddOrReplaceNamespace(&api.LinuxNamespace{Type: "pid", Path: "/pins/c1/pid"})
	if !p.expect("tok1", &nriCall{sandbox: "sb1", name: "debug", adjust: func(*api.Container) (*api.ContainerAdjustment, error) {
		calls++
		return adj, nil
	}}) {
		t.Fatal("expect refused on a usable connection")
	}
	for _, c := range []*api.Container{
		nriContainer("c0", "sb1", "debug", ""),        // not a TARGET create
		nriContainer("c0", "sb1", "debug", "unknown"), // a token the shim never gave
		nriContainer("c0", "sb2", "debug", "tok1"),    // another pod's container with the token
		nriContainer("c0", "sb1", "other", "tok1"),    // another container's
	} {
		got, _, err := p.CreateContainer(context.Background(), nil, c)
		if got != nil || err != nil {
			t.Errorf("event for %+v: adjustment %v %v, want none", c, got, err)
		}
	}
	got, _, err := p.CreateContainer(context.Background(), nil, nriContainer("c1", "sb1", "debug", "tok1"))
	if got != adj || err != nil {
		t.Fatalf("the request's own event: %v %v", got, err)
	}
	if again, _, _ := p.CreateContainer(context.Background(), nil, nriContainer("c2", "sb1", "debug", "tok1")); again != nil {
		t.Error("a second event for the same token was adjusted")
	}
	if answered, err := p.settle(context.Background(), "tok1"); !answered || err != nil {
		t.Errorf("settle = %v %v, want answered", answered, err)
	}
	if calls != 1 {
		t.Errorf("adjust ran %d times", calls)
	}
	if len(p.calls) != 0 {
		t.Errorf("calls left: %v", p.calls)
	}
}

// settle: an event that never came expires (a late one then gets nothing);
// an answer on a connection lost since does not count; a refusal is handed
// back.
func TestNRISettle(t *testing.T) {
	ctx := context.Background()
	p := testNRIPlugin(t)
	never := func(*api.Container) (*api.ContainerAdjustment, error) {
		t.Error("adjust ran for an expired call")
		return nil, nil
	}
	p.expect("late", &nriCall{sandbox: "sb", name: "n", adjust: never})
	if answered, _ := p.settle(ctx, "late"); answered {
		t.Error("a call without its event settled as answered")
	}
	if got, _, _ := p.CreateContainer(ctx, nil, nriContainer("c", "sb", "n", "late")); got != nil {
		t.Error("a late event was adjusted")
	}

	p.expect("lost", &nriCall{sandbox: "sb", name: "n", adjust: func(*api.Container) (*api.ContainerAdjustment, error) {
		return &api.ContainerAdjustment{}, nil
	}})
	p.CreateContainer(ctx, nil, nriContainer("c", "sb", "n", "lost"))
	p.set(false, "test: connection lost")
	p.set(true, "test: connected again")
	if answered, _ := p.settle(ctx, "lost"); answered {
		t.Error("an answer on a lost connection settled as answered")
	}

	refusal := errors.New("strict targeting: no")
	p.expect("refused", &nriCall{sandbox: "sb", name: "n", adjust: func(*api.Container) (*api.ContainerAdjustment, error) {
		return nil, refusal
	}})
	if _, _, err := p.CreateContainer(ctx, nil, nriContainer("c", "sb", "n", "refused")); !errors.Is(err, refusal) {
		t.Errorf("event answered %v, want the refusal", err)
	}
	if _, err := p.settle(ctx, "refused"); !errors.Is(err, refusal) {
		t.Errorf("settle = %v, want the refusal", err)
	}
}

// An event being answered when the create returns is waited for.
func TestNRISettleWaitsForTheAnswer(t *testing.T) {
	p := testNRIPlugin(t)
	release := make(chan struct{})
	p.expect("slow", &nriCall{sandbox: "sb", name: "n", adjust: func(*api.Container) (*api.ContainerAdjustment, error) {
		<-release
		return &api.ContainerAdjustment{}, nil
	}})
	go p.CreateContainer(context.Background(), nil, nriContainer("c", "sb", "n", "slow"))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		claimed := p.calls["slow"].state == callClaimed
		p.mu.Unlock()
		if claimed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the event never claimed the call")
		}
	}
	go func() { time.Sleep(20 * time.Millisecond); close(release) }()
	if answered, _ := p.settle(context.Background(), "slow"); !answered {
		t.Error("settle did not wait for the answer")
	}
}

// Not connected, or refused by the runtime: no call is registered, and the
// path says update and why.
func TestNRIPath(t *testing.T) {
	p := testNRIPlugin(t)
	if via, _ := p.path(); via != ViaNRI {
		t.Errorf("connected: path %s", via)
	}
	p.refuse(errors.New("validation error: attempted restricted namespace adjustment by plugin(s) cri-nstarget"))
	if via, why := p.path(); via != ViaUpdate || why == "" {
		t.Errorf("refused: path %s (%s)", via, why)
	}
	if p.expect("t", &nriCall{}) {
		t.Error("expect accepted a call while NRI is refused")
	}
	p.set(false, "lost")
	p.set(true, "connected again")
	if via, _ := p.path(); via != ViaNRI {
		t.Errorf("reconnected: path %s, want nri again", via)
	}
	if !isNamespaceConflict(errors.New(`rpc error: code = Unknown desc = failed to create containerd container: failed to get NRI adjustment for container: plugins "50-cri-nstarget" and "10-nri-sample" both tried to set Namespace pid`)) {
		t.Error("NRI's conflict between two plugins not recognised")
	}
	if isNamespaceConflict(errors.New(`plugins "10-a" and "20-b" both tried to set Namespace pid`)) {
		t.Error("a conflict between two other plugins taken for the shim's")
	}
	if !isNamespaceRefusal(errors.New("rpc error: code = Unknown desc = failed to create containerd container: validation error: attempted restricted namespace adjustment by plugin(s) \"50-cri-nstarget\"")) {
		t.Error("the default validator's refusal not recognised")
	}
}

// nriRig is a rig whose fake backend sends the NRI event of every create to
// the shim's plugin, as containerd 2.2+ does; adjustments are what the
// plugin answered, by container id; fail, when set, fails the create after
// the event (as a runc failure would).
func nriRig(t *testing.T, strict bool) (*rig, map[string]*api.ContainerAdjustment, *error) {
	r := newRig(t, strict)
	p := testNRIPlugin(t)
	r.server.target.nri = p
	adjusted := map[string]*api.ContainerAdjustment{}
	var fail error
	r.backend.nri = func(id string, req *runtimeapi.CreateContainerRequest) error {
		c := &api.Container{Id: id, PodSandboxId: req.GetPodSandboxId(), Name: req.GetConfig().GetMetadata().GetName(),
			Annotations: req.GetConfig().GetAnnotations()}
		adj, _, err := p.CreateContainer(context.Background(), nil, c)
		if err != nil {
			return err
		}
		if adj != nil {
			adjusted[id] = adj
		}
		return fail
	}
	return r, adjusted, &fail
}

// Through NRI the create is pointed at the pins by the event's answer: the
// adjustment holds the pin and the record, and no spec is edited after.
func TestCreateViaNRI(t *testing.T) {
	r, adjusted, _ := nriRig(t, false)
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	id, err := r.create(t, createReq("sb1", pidTarget("app1")))
	if err != nil {
		t.Fatal(err)
	}
	adj := adjusted[id]
	if adj == nil || len(adj.GetLinux().GetNamespaces()) != 1 || adj.GetLinux().GetNamespaces()[0].GetPath() != "/pins/"+id+"/pid" {
		t.Fatalf("adjustment %v, want the pid namespace at the pin", adj)
	}
	rec, ok, err := oci.ParseRecord(adj.GetAnnotations())
	if !ok || err != nil || rec.Via != ViaNRI || rec.Namespaces["pid"].Result != oci.Targeted {
		t.Errorf("record in the adjustment: %+v %v %v", rec, ok, err)
	}
	if _, edited := r.specs.specs[id]; edited {
		t.Error("the spec was edited after create: the NRI path writes none")
	}
	if !r.pinned(id) {
		t.Error("no pins")
	}
	if got := r.backend.created[0].GetConfig().GetAnnotations()[annotationRequest]; got == "" {
		t.Error("the forwarded request carries no token")
	}
}

// The backend fails the create after the event was answered: the pins made
// for the container that never was are released.
func TestCreateViaNRIBackendFailsAfterTheEvent(t *testing.T) {
	r, _, fail := nriRig(t, false)
	*fail = status.Error(codes.Unknown, "runc create failed")
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	if _, err := r.create(t, createReq("sb1", pidTarget("app1"))); status.Code(err) != codes.Unknown {
		t.Fatalf("create = %v, want the backend's error", err)
	}
	if r.pinned("new1") {
		t.Error("pins left for a container the backend did not make")
	}
}

// Strict, and the pin cannot be made: the event is answered with the
// refusal, the backend makes nothing, and the caller gets FailedPrecondition.
func TestCreateViaNRIStrictRefusal(t *testing.T) {
	r, _, _ := nriRig(t, true)
	r.pins.err = errors.New("mount: operation not permitted")
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	if _, err := r.create(t, createReq("sb1", pidTarget("app1"))); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("create = %v, want FailedPrecondition", err)
	}
	if n := r.createdCount(); n != 0 {
		t.Errorf("backend made %d containers", n)
	}
}

// The event never reaches the shim (the connection dropped before it, or
// containerd went on without the plugin): the Update path points the spec.
func TestCreateNRIEventMissed(t *testing.T) {
	r, _, _ := nriRig(t, false)
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

// Pins made in the NRI event belong to a container the backend does not
// list until its create returns: a stale-pin sweep meanwhile (another pod's
// RemovePodSandbox, say) must leave them.
func TestCreateViaNRIPinsSurviveASweep(t *testing.T) {
	r, _, _ := nriRig(t, false)
	event := r.backend.nri
	var sweepErr error
	r.backend.nri = func(id string, req *runtimeapi.CreateContainerRequest) error {
		if err := event(id, req); err != nil {
			return err
		}
		sweepErr = r.server.target.releaseStale(context.Background())
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
	if r.server.target.pinning.has(id) {
		t.Error("still marked in flight after the create returned")
	}
}

// The create's context ends while its NRI event is being answered (adjust
// is still writing the create's outcome): settle must not hand the outcome
// back before the answer is done, or both goroutines write it at once (the
// race detector reports it; without it, the answer is seen unfinished).
func TestSettleWaitsForAnAnswerInProgress(t *testing.T) {
	p := testNRIPlugin(t)
	o := &outcome{rec: oci.Record{Namespaces: map[string]oci.NamespaceRecord{}}} // the create's
	in, release := make(chan struct{}), make(chan struct{})
	var done atomic.Bool
	if !p.expect("tok", &nriCall{sandbox: "sb1", name: "debug", adjust: func(*api.Container) (*api.ContainerAdjustment, error) {
		close(in)
		<-release
		o.rec.Namespaces["pid"] = oci.NamespaceRecord{Result: oci.Targeted} // as adjust does
		done.Store(true)
		return nil, nil
	}}) {
		t.Fatal("expect refused")
	}
	go p.CreateContainer(context.Background(), nil, nriContainer("c1", "sb1", "debug", "tok"))
	<-in
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the create's late steps are out of time
	go func() {
		time.Sleep(100 * time.Millisecond)
		close(release)
	}()
	answered, err := p.settle(ctx, "tok")
	if !done.Load() {
		t.Fatal("settle returned while the NRI answer was still writing the create's outcome")
	}
	// the handler owns the outcome again
	o.rec.Namespaces["pid"] = oci.NamespaceRecord{Result: oci.Fallback}
	if !answered || err != nil {
		t.Errorf("answered %v, %v: the answer finished on a live connection", answered, err)
	}
}
