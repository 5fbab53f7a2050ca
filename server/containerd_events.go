package server

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	ctrdevents "github.com/containerd/containerd/api/events"
	eventsapi "github.com/containerd/containerd/api/services/events/v1"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
)

// taskEvents is containerd's task events in one containerd namespace, from
// its event service (the same on containerd 1.7 and 2.x): the creation of
// each task, with its init's pid, and the exit of each process. It hands
// them to a taskHandler on its own goroutine, in the order containerd sent
// them, and subscribes again whenever the stream ends (containerd
// restarting), until its context ends. Events are not replayed: after every
// subscription the handler is told (subscribed), to look for what it may
// have missed.
type taskEvents struct {
	events eventsapi.EventsClient
	ns     string
	log    *logrus.Entry
	// up says whether a subscription is open now (read by the check after
	// a start, verifier).
	up atomic.Bool
}

// taskHandler takes containerd's task events. taskCreated and taskExited
// run on the event stream's goroutine and must not block: what takes a
// call goes to the side queue.
type taskHandler interface {
	taskCreated(id string, pid uint32)
	taskExited(e taskExit)
	subscribed()
}

// taskExit is one process's exit, as containerd's TaskExit event says it.
type taskExit struct {
	container string // the container's id
	process   string // the process's: the container's id for its init
	pid       uint32
	status    uint32 // 128+N when killed by signal N
	at        time.Time
}

// init tells whether the process is the container's init (not an exec).
func (e taskExit) init() bool { return e.process == e.container }

// The topics the shim reads, and the payloads' type names as containerd
// marshals them (typeurl: the message's full name).
const (
	topicTaskCreate = "/tasks/create"
	topicTaskExit   = "/tasks/exit"
)

// resubscribeEvery is how long after a failed subscription the next one is
// tried.
const resubscribeEvery = time.Second

func newTaskEvents(conn grpc.ClientConnInterface, ns string, log *logrus.Entry) *taskEvents {
	return &taskEvents{events: eventsapi.NewEventsClient(lenientConn{conn}), ns: ns, log: log}
}

// filters are the event service's filters for the topics read, in the
// namespace (one filter per topic: the service sends what matches any).
func (e *taskEvents) filters() []string {
	ns := strconv.Quote(e.ns)
	return []string{
		"namespace==" + ns + ",topic==" + strconv.Quote(topicTaskCreate),
		"namespace==" + ns + ",topic==" + strconv.Quote(topicTaskExit),
	}
}

// run subscribes, and subscribes again after each failure, until ctx ends.
// A failure is logged once until a subscription works again.
func (e *taskEvents) run(ctx context.Context, h taskHandler) {
	failing := false
	for ctx.Err() == nil {
		err := e.subscribe(ctx, h)
		e.up.Store(false)
		if ctx.Err() != nil {
			return
		}
		if !failing {
			e.log.WithError(err).Warn("containerd's task events: the subscription ended; subscribing again every second (the checks after a start and the exits of targets wait for it)")
		}
		failing = true
		select {
		case <-ctx.Done():
		case <-time.After(resubscribeEvery):
		}
	}
}

// subscribe reads one subscription until it fails.
func (e *taskEvents) subscribe(ctx context.Context, h taskHandler) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := e.events.Subscribe(ctx, &eventsapi.SubscribeRequest{Filters: e.filters()})
	if err != nil {
		return fmt.Errorf("subscribe: %w", err)
	}
	// containerd registers the subscription once the call has reached it,
	// and answers nothing until the first event: the handler looks for
	// what it missed a moment later (subscribed)
	e.up.Store(true)
	h.subscribed()
	for {
		env, err := stream.Recv()
		if err != nil {
			return err
		}
		if env.GetNamespace() != e.ns {
			continue
		}
		switch env.GetTopic() {
		case topicTaskCreate:
			var c ctrdevents.TaskCreate
			if decode(env.GetEvent(), &c) {
				h.taskCreated(c.GetContainerID(), c.GetPid())
			}
		case topicTaskExit:
			var x ctrdevents.TaskExit
			if decode(env.GetEvent(), &x) {
				h.taskExited(taskExit{container: x.GetContainerID(), process: x.GetID(), pid: x.GetPid(),
					status: x.GetExitStatus(), at: x.GetExitedAt().AsTime()})
			}
		}
	}
}

// decode reads an event's payload into m, leniently (a string that is not
// UTF-8, a mount option say, is made valid); false when it is not m's type.
func decode(a *anypb.Any, m proto.Message) bool {
	if a == nil || !a.MessageIs(m) {
		return false
	}
	if proto.Unmarshal(a.GetValue(), m) == nil {
		return true
	}
	valid, err := validUTF8(a.GetValue(), m.ProtoReflect().Descriptor())
	if err != nil {
		return false
	}
	proto.Reset(m)
	return proto.Unmarshal(valid, m) == nil
}
