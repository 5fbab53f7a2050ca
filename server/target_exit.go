package server

import (
	"context"
	"errors"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// exitWatch says, on the pod, why a debugger ended with 137 when its target
// did: the kernel kills every process of a PID namespace whose init exits,
// and a container that joined a target's own PID namespace dies with the
// target's process. It keeps which containers were pinned in which
// target's PID namespace (watch: from their create; rebuilt after a restart
// of the shim by the catch-up), learns exits from containerd's event service
// (taskExited, on the event stream's goroutine), and on a target's exit
// looks at each such container on the side queue: its pinned namespace has
// no init left, and it exited with 137 within a second of the target: a
// Warning TargetExited, once per container (its record is marked first;
// a mark that cannot be written posts nothing, and the next catch-up tries
// again). It is a part of afterAnswer, which builds it (newAfterAnswer)
// and owns its maps.
type exitWatch struct {
	side     *sideQueue        // afterAnswer's
	cri      containerStatuses // the backend CRI's word on a container
	pins     pinReader
	hasInit  func(path string) (bool, error) // whether a pinned PID namespace has an init
	records  recordOwner
	reporter reporter
	log      *logrus.Entry

	// mu guards the maps; a leaf. Each is bounded by the containers with
	// pins (and exits by maxExits).
	mu       sync.Mutex
	joined   map[string]map[string]bool // target -> the containers pinned in its PID namespace
	targetOf map[string]string          // such a container -> its target
	exits    map[string]taskExit        // their exits, until their target's is handled
}

const (
	// diedWithin: a container killed by its target's end exits within this
	// of the target (the kernel kills it while the target's init exits;
	// each exit is timed by a shim of its own).
	diedWithin = time.Second
	// exitLooks and exitWait bound the looks for a container's exit after
	// its target's, which containerd's CRI may not have recorded yet.
	exitLooks = 5
	exitWait  = 300 * time.Millisecond
	// maxExits bounds the exits kept.
	maxExits = 1024
)

// watch records that container id is pinned in target's PID namespace.
func (x *exitWatch) watch(target, id string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.joined[target] == nil {
		x.joined[target] = map[string]bool{}
	}
	x.joined[target][id] = true
	x.targetOf[id] = target
}

// unwatch takes back the watch of container id in target's PID namespace;
// false when it was not there (a target's exit took it, or a removal).
func (x *exitWatch) unwatch(target, id string) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.joined[target][id] {
		return false
	}
	delete(x.joined[target], id)
	if len(x.joined[target]) == 0 {
		delete(x.joined, target)
	}
	delete(x.targetOf, id)
	return true
}

// forget drops container id (removed).
func (x *exitWatch) forget(id string) {
	if x == nil {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if target, ok := x.targetOf[id]; ok {
		delete(x.joined[target], id)
		if len(x.joined[target]) == 0 {
			delete(x.joined, target)
		}
	}
	delete(x.targetOf, id)
	delete(x.exits, id)
}

// taskExited takes containerd's exit event of a process: a watched
// container's exit is kept; a target's hands its containers to the side
// queue.
func (x *exitWatch) taskExited(e taskExit) {
	if !e.init() {
		return
	}
	x.mu.Lock()
	if _, ok := x.targetOf[e.container]; ok && len(x.exits) < maxExits {
		x.exits[e.container] = e
	}
	var ids []string
	for id := range x.joined[e.container] {
		ids = append(ids, id)
		delete(x.targetOf, id)
	}
	delete(x.joined, e.container)
	x.mu.Unlock()
	if len(ids) > 0 {
		x.side.submit(chanExit, func(ctx context.Context) { x.targetExited(ctx, e, ids, 1) })
	}
}

// targetExited looks at each container (ids) pinned in the PID namespace
// of a target whose process exited (te). One whose exit containerd has not
// recorded yet is looked at again a little later, up to exitLooks times.
func (x *exitWatch) targetExited(ctx context.Context, te taskExit, ids []string, look int) {
	var again []string
	for _, id := range ids {
		de, st := x.exitOf(ctx, id)
		switch {
		case st == runtimeapi.ContainerState_CONTAINER_EXITED:
			x.judge(ctx, id, te, de)
		case st != runtimeapi.ContainerState_CONTAINER_UNKNOWN && look < exitLooks:
			again = append(again, id)
		}
	}
	if len(again) > 0 {
		x.side.later(exitWait, chanExit, func(ctx context.Context) { x.targetExited(ctx, te, again, look+1) })
	}
}

// exitOf is container id's exit, from containerd's event or its CRI, and
// its state (UNKNOWN: gone, or containerd did not answer).
func (x *exitWatch) exitOf(ctx context.Context, id string) (taskExit, runtimeapi.ContainerState) {
	x.mu.Lock()
	e, ok := x.exits[id]
	delete(x.exits, id)
	x.mu.Unlock()
	if ok {
		return e, runtimeapi.ContainerState_CONTAINER_EXITED
	}
	return x.status(ctx, id)
}

// status is container id's state in the backend's CRI, and its exit when
// it has exited.
func (x *exitWatch) status(ctx context.Context, id string) (taskExit, runtimeapi.ContainerState) {
	resp, err := x.cri.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		return taskExit{}, runtimeapi.ContainerState_CONTAINER_UNKNOWN
	}
	st := resp.GetStatus()
	return taskExit{container: id, process: id, status: uint32(st.GetExitCode()), at: time.Unix(0, st.GetFinishedAt())}, st.GetState()
}

// diedWith tells whether a container that exited (d) was killed by its
// target's end (te): SIGKILL, within diedWithin of the target.
func diedWith(te, d taskExit) bool {
	gap := d.at.Sub(te.at)
	return d.status == 128+9 && gap <= diedWithin && gap >= -diedWithin
}

// judge says that container id died with its target (te) when it did: its
// pinned PID namespace has no init left (the target's process was it), and
// it was killed within a second of the target.
func (x *exitWatch) judge(ctx context.Context, id string, te, d taskExit) {
	pin, ok := x.pins.Path(id, namespaces.PID)
	if !ok {
		return
	}
	if live, err := x.hasInit(pin); err != nil || live || !diedWith(te, d) {
		return
	}
	x.tell(ctx, id, te)
}

// errSaid: the record says the Event was posted already.
var errSaid = errors.New("said before")

// tell marks container id's record with its target's exit (te), then posts
// the Warning: once, across restarts of the shim.
func (x *exitWatch) tell(ctx context.Context, id string, te taskExit) {
	var rec oci.Record
	var name string
	err := x.records.edit(ctx, id, func(spec *specs.Spec) ([]oci.Opt, error) {
		r, ok, err := oci.ParseRecord(spec.Annotations)
		switch {
		case err != nil || !ok:
			return nil, errNothingToCheck
		case r.TargetExited != nil:
			return nil, errSaid
		}
		r.TargetExited = &oci.TargetExit{ExitCode: int32(te.status), At: te.at.UTC().Format(time.RFC3339Nano)}
		rec, name = r, spec.Annotations[criNameAnnotation]
		return []oci.Opt{oci.WithRecord(r)}, nil
	})
	log := x.log.WithFields(logrus.Fields{"container": id, "target": te.container, "target_exit": te.status})
	switch {
	case errors.Is(err, errSaid) || errors.Is(err, errNothingToCheck):
		return
	case err != nil:
		log.WithError(err).Warn("a container died with its target; its record could not be marked, so the Event waits for the next catch-up")
		return
	}
	log.WithField("name", name).Warn("the target's process, the init of the PID namespace this container joined, exited: the kernel killed the container with it (exit 137)")
	x.reporter.eventOf(targetExitedEvent(name, rec, te.status))
}

// rewatch watches container id (its exit d, its state dst) again in
// target's PID namespace, as its record says. The watch is registered
// before the target's status is asked, so that an exit handled meanwhile
// takes id along (taskExited); a target found exited whose exit did not
// take it hands it to the judgement here. A container removed meanwhile
// is not left watched: its removal releases its pins, then forgets it, so
// a watch registered after the forget finds the pins gone.
func (x *exitWatch) rewatch(ctx context.Context, id, target string, d taskExit, dst runtimeapi.ContainerState) {
	x.watch(target, id)
	if _, ok := x.pins.Path(id, namespaces.PID); !ok {
		x.unwatch(target, id)
		return
	}
	te, tst := x.status(ctx, target)
	switch {
	case tst == runtimeapi.ContainerState_CONTAINER_RUNNING || tst == runtimeapi.ContainerState_CONTAINER_CREATED:
		if dst == runtimeapi.ContainerState_CONTAINER_EXITED {
			x.unwatch(target, id) // it ended before its target: nothing to say
		}
	case tst == runtimeapi.ContainerState_CONTAINER_EXITED:
		if x.unwatch(target, id) && dst == runtimeapi.ContainerState_CONTAINER_EXITED {
			x.judge(ctx, id, te, d)
		}
	default:
		x.unwatch(target, id)
	}
}
