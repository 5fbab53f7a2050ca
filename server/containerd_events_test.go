package server

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	ctrdevents "github.com/containerd/containerd/api/events"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"github.com/containerd/containerd/api/types"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

// fakeEventService is containerd's event service: each subscription gets
// the envelopes of one round, then ends (as when containerd restarts).
type fakeEventService struct {
	eventsapi.UnimplementedEventsServer
	mu      sync.Mutex
	rounds  [][]*types.Envelope
	filters [][]string
}

func (f *fakeEventService) Subscribe(req *eventsapi.SubscribeRequest, ss eventsapi.Events_SubscribeServer) error {
	f.mu.Lock()
	f.filters = append(f.filters, req.GetFilters())
	var round []*types.Envelope
	if len(f.rounds) > 0 {
		round, f.rounds = f.rounds[0], f.rounds[1:]
	}
	f.mu.Unlock()
	if round == nil {
		<-ss.Context().Done()
		return nil
	}
	for _, e := range round {
		if err := ss.Send(e); err != nil {
			return err
		}
	}
	return nil
}

// envelope marshals ev as containerd does (typeurl: the message's full name).
func envelope(t *testing.T, ns, topic string, ev proto.Message) *types.Envelope {
	t.Helper()
	b, err := proto.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	return &types.Envelope{Namespace: ns, Topic: topic, Event: &anypb.Any{TypeUrl: string(ev.ProtoReflect().Descriptor().FullName()), Value: b}}
}

// gotEvents is a taskHandler that keeps what it is told.
type gotEvents struct {
	mu      sync.Mutex
	created []string
	exited  []taskExit
	subs    int
}

func (g *gotEvents) taskCreated(id string, pid uint32) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.created = append(g.created, id)
}

func (g *gotEvents) taskExited(e taskExit) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.exited = append(g.exited, e)
}

func (g *gotEvents) subscribedAgain() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.subs
}

func (g *gotEvents) subscribed() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.subs++
}

// The task events of the namespace reach the handler in order, decoded
// even where a string is not UTF-8; others are not; after the stream ends
// the reader subscribes again, and says so (what was missed is to be
// looked for).
func TestTaskEvents(t *testing.T) {
	at := time.Unix(1700000000, 5).UTC()
	badBundle := envelope(t, "k8s.io", topicTaskCreate, &ctrdevents.TaskCreate{ContainerID: "c1", Pid: 7})
	badBundle.Event.Value = protowire.AppendBytes(protowire.AppendTag(badBundle.Event.Value, 2, protowire.BytesType), []byte("/run/\xff/c1"))
	svc := &fakeEventService{rounds: [][]*types.Envelope{{
		badBundle,
		envelope(t, "moby", topicTaskCreate, &ctrdevents.TaskCreate{ContainerID: "elsewhere", Pid: 8}),
		envelope(t, "k8s.io", topicTaskExit, &ctrdevents.TaskExit{ContainerID: "c1", ID: "c1", Pid: 7, ExitStatus: 137, ExitedAt: timestamppb.New(at)}),
		envelope(t, "k8s.io", topicTaskExit, &ctrdevents.TaskCreate{ContainerID: "mislabelled"}),
	}, {
		envelope(t, "k8s.io", topicTaskExit, &ctrdevents.TaskExit{ContainerID: "c2", ID: "exec1", Pid: 9, ExitStatus: 0, ExitedAt: timestamppb.New(at)}),
	}}}
	lis := bufconn.Listen(1 << 16)
	gs := grpc.NewServer()
	eventsapi.RegisterEventsServer(gs, svc)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn := dialMem(t, lis)
	ev := newTaskEvents(conn, "k8s.io", logrus.NewEntry(logrus.New()))
	got := &gotEvents{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		ev.run(ctx, got)
		close(done)
	}()
	waitFor(t, "three subscriptions", func() bool { return got.subscribedAgain() >= 3 })
	cancel()
	<-done
	got.mu.Lock()
	defer got.mu.Unlock()
	if !slices.Equal(got.created, []string{"c1"}) {
		t.Errorf("created %v, want c1 alone", got.created)
	}
	want := []taskExit{{container: "c1", process: "c1", pid: 7, status: 137, at: at}, {container: "c2", process: "exec1", pid: 9, status: 0, at: at}}
	if len(got.exited) != 2 || got.exited[0] != want[0] || got.exited[1] != want[1] || !got.exited[0].init() || got.exited[1].init() {
		t.Errorf("exited %+v, want %+v", got.exited, want)
	}
	svc.mu.Lock()
	defer svc.mu.Unlock()
	if f := svc.filters[0]; !slices.Equal(f, []string{`namespace=="k8s.io",topic=="/tasks/create"`, `namespace=="k8s.io",topic=="/tasks/exit"`}) {
		t.Errorf("filters %q", f)
	}
	if ev.up.Load() {
		t.Error("up after the reader ended")
	}
}

// Shutdown ends the goroutines that live with the server: the side
// queue's and the reader of containerd's events (subscribed, and waiting
// for events), and waits for them.
func TestShutdownEndsSideGoroutines(t *testing.T) {
	svc := &fakeEventService{}
	lis := bufconn.Listen(1 << 16)
	gs := grpc.NewServer()
	eventsapi.RegisterEventsServer(gs, svc)
	go gs.Serve(lis)
	t.Cleanup(gs.Stop)
	conn := dialMem(t, lis)
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	s := New(Options{Backend: conn, Containerd: conn, ContainerdNamespace: "k8s.io", StateDir: t.TempDir(), TargetingVia: ViaUpdate, Log: logrus.NewEntry(log)})
	rctx, rcancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = s.Run(rctx) // its reconcile fails: no CRI here
	rcancel()
	waitFor(t, "the subscription to containerd's events", func() bool {
		svc.mu.Lock()
		defer svc.mu.Unlock()
		return len(svc.filters) > 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s.Shutdown(ctx)
	if ctx.Err() != nil {
		t.Fatal("Shutdown waited until its deadline")
	}
	// Shutdown has waited for them: none is left now
	buf := make([]byte, 1<<20)
	stacks := string(buf[:runtime.Stack(buf, true)])
	for _, f := range []string{"server.(*taskEvents).run", "server.(*sideQueue).run"} {
		if strings.Contains(stacks, f) {
			t.Errorf("a goroutine in %s after Shutdown:\n%s", f, stacks)
		}
	}
}
