package server

import (
	"context"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// afterAnswer is what the shim does once an answer has gone back, away
// from any call: the check after a start (verifier, target_verify.go), the
// exit watch (exitWatch, target_exit.go) and the catch-up after each
// subscription to containerd's events (after_catchup.go). It is named for
// when it runs, not for one check: the three share one queue, one record
// owner and one reporter, and are told of the same containers by the same
// hooks and events. It owns its side queue (side.go: built here, its
// goroutine started by Run and ended by Shutdown), the verifier's reads and
// the exit watch's maps; it knows nothing of the targeter.
//
// It is told, by the hooks (afterHooks: a create answered, a start
// answered, a removal) and by containerd's events (taskHandler: a task
// created, a process exited, a subscription opened), each without waiting:
// what takes a call is queued on side. Every field is set by newAfterAnswer,
// in one literal, and never changes after.
type afterAnswer struct {
	side   *sideQueue // its own: every job of the three runs here, one at a time
	verify *verifier  // the check after a start; nil: none
	exits  *exitWatch // the debuggers a target's exit takes along
	// for the catch-up: the pinned containers, their records, its log
	pins    pinReader
	records recordOwner
	log     *logrus.Entry
}

// What afterAnswer needs from outside, each narrow: the other side of it
// is the server's (records, the pins, containerd's CRI).
type (
	// recordOwner is the containers' records as their one owner (records,
	// records.go) lets them be read and written.
	recordOwner interface {
		read(ctx context.Context, id string) (*specs.Spec, error)
		edit(ctx context.Context, id string, fn func(*specs.Spec) ([]oci.Opt, error)) error
	}
	// pinReader says which containers have pins, and where (pinStore's
	// reads).
	pinReader interface {
		Path(id string, kind namespaces.Kind) (string, bool)
		IDs() ([]string, error)
	}
	// containerStatuses is the backend CRI's word on a container (the exit
	// watch, the catch-up).
	containerStatuses interface {
		ContainerStatus(ctx context.Context, in *runtimeapi.ContainerStatusRequest, opts ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error)
	}
	// containerStopper stops a container through the backend (strict mode,
	// a container the check saw not joined).
	containerStopper interface {
		StopContainer(ctx context.Context, in *runtimeapi.StopContainerRequest, opts ...grpc.CallOption) (*runtimeapi.StopContainerResponse, error)
	}
	// handlerLearner is told of a runtime handler seen not joining
	// (handlers; a nil *handlers learns nothing).
	handlerLearner interface {
		learn(handler, why string)
	}
)

// afterDeps is what an afterAnswer is built on: narrow interfaces and
// values, nothing of the targeter's.
type afterDeps struct {
	life    context.Context      // the server's lifetime: the side queue's
	dropped func(channel string) // counts the side queue's drops; nil: none
	records recordOwner
	pins    pinReader
	cri     interface {
		containerStatuses
		containerStopper
	}
	states     taskStates  // containerd's word on a task; nil: no check after a start
	subscribed func() bool // whether containerd's events are read now
	handlers   handlerLearner
	of         func(pid int, kinds []namespaces.Kind) (map[namespaces.Kind]namespaces.ID, error) // a process's namespaces, read through a pidfd
	hasInit    func(path string) (bool, error)                                                   // whether a pinned PID namespace has an init
	host       namespaces.ID                                                                     // the shim's own PID namespace: the host's
	report     reporter
	strict     bool
	log        *logrus.Entry
}

// newAfterAnswer builds what happens after the answers on d, and starts
// nothing: Run starts its side queue (run).
func newAfterAnswer(d afterDeps) *afterAnswer {
	side := newSideQueue(d.life, d.log, d.dropped)
	return &afterAnswer{
		side:   side,
		verify: newVerifier(side, d),
		exits: &exitWatch{side: side, cri: d.cri, pins: d.pins, hasInit: d.hasInit, records: d.records, reporter: d.report, log: d.log,
			joined: map[string]map[string]bool{}, targetOf: map[string]string{}, exits: map[string]taskExit{}},
		pins:    d.pins,
		records: d.records,
		log:     d.log,
	}
}

// newVerifier is the check after each start of a pinned container, on
// side; nil when d has no word of containerd's on tasks.
func newVerifier(side *sideQueue, d afterDeps) *verifier {
	if d.states == nil {
		return nil
	}
	return &verifier{side: side, records: d.records, pins: d.pins, cri: d.cri, states: d.states, learn: d.handlers,
		reporter: d.report, log: d.log, strict: d.strict, of: d.of, host: d.host, subscribed: d.subscribed, reads: map[string]*taskRead{}}
}

// subscribedOf tells whether e has a subscription open now; never, with no
// events read (e nil).
func subscribedOf(e *taskEvents) func() bool {
	if e == nil {
		return func() bool { return false }
	}
	return e.up.Load
}

// run runs the side queue's jobs until the server's life ends (Run starts
// it, Shutdown waits for it).
func (a *afterAnswer) run() { a.side.run() }

// afterHooks is what the targeter's hooks hand to what happens after their
// answers (afterAnswer): each returns at once.
type afterHooks interface {
	// created: container id was created with rec; one pinned in its
	// target's PID namespace is watched from now on.
	created(id string, rec oci.Record)
	// started: the start of container id, which has pins, was answered;
	// its check is queued.
	started(id string)
	// removed: container id was removed, its pins released first; it is
	// forgotten.
	removed(id string)
}

func (a *afterAnswer) created(id string, rec oci.Record) {
	if ns := rec.Namespaces[string(namespaces.PID)]; ns.Result == oci.Targeted {
		a.exits.watch(rec.Target, id)
	}
}

func (a *afterAnswer) started(id string) { a.verify.started(id) }

func (a *afterAnswer) removed(id string) { a.exits.forget(id) }

// taskCreated, taskExited and subscribed make afterAnswer containerd's
// events' handler (taskHandler): on the event stream's goroutine, each
// returns at once.
func (a *afterAnswer) taskCreated(id string, pid uint32) { a.verify.taskCreated(id, pid) }

func (a *afterAnswer) taskExited(e taskExit) {
	a.verify.taskExited(e)
	a.exits.taskExited(e)
}

// subscribed looks for what was missed a moment later: containerd
// registers a subscription once the call has reached it.
func (a *afterAnswer) subscribed() { a.side.later(time.Second, chanScan, a.catchUp) }
