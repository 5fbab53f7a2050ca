package server

import (
	"context"
	"slices"
	"testing"
	"time"

	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/intents"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// eventService serves a fake containerd event service on an in-memory
// listener, and returns a connection to it.
func eventService(t *testing.T) *grpc.ClientConn {
	t.Helper()
	lis := bufconn.Listen(1 << 16)
	gs := grpc.NewServer()
	eventsapi.RegisterEventsServer(gs, &fakeEventService{})
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	return dialMem(t, lis)
}

// New builds the Server and starts nothing: no goroutine of the server's
// (the side queue's, the reader of containerd's events, the NRI
// connection's) runs until Run. grpc.NewServer's stream workers are grpc's.
func TestNewStartsNothing(t *testing.T) {
	conn := eventService(t)
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	before := goleak.IgnoreCurrent()
	s := New(Options{Backend: conn, Containerd: conn, ContainerdNamespace: "k8s.io", StateDir: t.TempDir(),
		TargetingVia: ViaAuto, NRISocket: t.TempDir() + "/no-nri.sock", Log: logrus.NewEntry(log)})
	goleak.VerifyNone(t, before, goleak.IgnoreTopFunction("google.golang.org/grpc.(*Server).serverWorker"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.Shutdown(ctx)
}

// steps is what the fakes saw, in order.
type steps = recorder[string]

// slowList is an intent store whose List takes a while (longer than the
// catch-up waits after a subscription), then tells steps the start-up
// reconcile has read the records.
type slowList struct {
	intentStore
	steps *steps
}

func (s slowList) List() ([]intents.Record, error) {
	time.Sleep(1500 * time.Millisecond)
	s.steps.add("reconcile")
	return s.intentStore.List()
}

// scanSpecs tells steps of each read of a stored spec: only the catch-up's
// scan reads them here.
type scanSpecs struct {
	specEditor
	steps *steps
}

func (s scanSpecs) Spec(ctx context.Context, id string) (*specs.Spec, error) {
	s.steps.add("scan " + id)
	return s.specEditor.Spec(ctx, id)
}

// listedCRI is a backend whose ListContainers answers ids alone.
type listedCRI struct {
	backendCRI
	ids []string
}

func (l listedCRI) ListContainers(context.Context, *runtimeapi.ListContainersRequest, ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	out := &runtimeapi.ListContainersResponse{}
	for _, id := range l.ids {
		out.Containers = append(out.Containers, &runtimeapi.Container{Id: id})
	}
	return out, nil
}

// Run reconciles at start-up before it reads containerd's events: the
// catch-up that the first subscription schedules scans after the start-up
// reconcile, never during it.
func TestRunReconcilesBeforeTheCatchUp(t *testing.T) {
	conn := eventService(t)
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	seen := &steps{}
	buildRigEdit(t, false, nil, false, func(d *deps) {
		d.intents = slowList{intentStore: d.intents, steps: seen}
		d.specs = scanSpecs{specEditor: d.specs, steps: seen}
		d.events = newTaskEvents(conn, "k8s.io", logrus.NewEntry(log))
		// a container of the backend's, pinned: the reconcile keeps its
		// pins, the catch-up reads its record
		d.pins.(*fakePins).held["c1"] = map[namespaces.Kind]string{namespaces.PID: "/pins/c1/pid"}
		d.cri = listedCRI{backendCRI: d.cri, ids: []string{"c1"}}
	})
	waitFor(t, "the catch-up's scan", func() bool { return slices.Contains(seen.list(), "scan c1") })
	if got := seen.list(); got[0] != "reconcile" {
		t.Errorf("steps %q: the catch-up scanned before the start-up reconcile read the records", got)
	}
}
