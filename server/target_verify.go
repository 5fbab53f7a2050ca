package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/containerd/containerd/api/types/task"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// verifier checks, once a container whose spec was pointed at pins has
// started, that its init process is in the pinned namespaces, and says
// what it saw: in the record (each namespace's verify), the targeting
// metric and the log (stage verify), and an Event on the pod. A spec says
// what the shim asked for; only this says what the runtime did (a VM or
// user-space-kernel runtime ignores the path and starts the container in a
// namespace of its own).
//
// It never delays the start: the start hook hands it the container's id
// once the backend has answered (started), and the check runs on the side
// queue. The process is read through a pidfd (namespaces.Of) as soon as
// containerd's event for its task's creation arrives (taskCreated, on the
// event stream's goroutine: the process then waits for its start, and a
// debugger that prints and exits is gone within milliseconds of it), else
// once the start is answered; what was read is then confirmed with
// containerd (the same pid, not yet exited when it was read), and a read
// that containerd does not confirm concludes nothing (judge): a reused pid
// cannot pass.
//
// It is a part of afterAnswer, which builds it (newVerifier) and owns its
// reads.
type verifier struct {
	side     *sideQueue // afterAnswer's
	records  recordOwner
	pins     pinReader
	cri      containerStopper // strict mode stops a container not joined
	states   taskStates       // containerd's word on a task
	learn    handlerLearner   // told of a runtime handler seen not joining
	reporter reporter
	log      *logrus.Entry
	strict   bool
	of       func(pid int, kinds []namespaces.Kind) (map[namespaces.Kind]namespaces.ID, error)
	host     namespaces.ID // the shim's own PID namespace: the host's
	// subscribed tells whether containerd's task events are being read
	// now (a read of the task's creation may still come).
	subscribed func() bool

	// mu guards reads; a leaf.
	mu    sync.Mutex
	reads map[string]*taskRead // by container: read at its task's creation, until its check takes it
}

// taskRead is what was read of a container's init process through a
// pidfd: its namespaces, or why not (err); at is a moment after the read,
// when the process had not been reaped yet at some moment before. exit is
// containerd's event of its exit, once seen.
type taskRead struct {
	pid  uint32
	ids  map[namespaces.Kind]namespaces.ID
	err  error
	at   time.Time
	exit *taskExit
}

// taskWord is containerd's word on the task, asked after the read: its
// init's pid, whether it had exited and when; err when containerd could not
// say.
type taskWord struct {
	pid      uint32
	exited   bool
	exitedAt time.Time
	err      error
}

// The kinds read of a process, and what bounds the reads kept.
const (
	maxReads   = 256             // reads waiting for their start's answer
	readTTL    = 2 * time.Minute // a read whose start never came is dropped after
	verifyTry  = 3               // checks of a process that exited unread, while the event's read may come
	verifyWait = 200 * time.Millisecond
)

var readKinds = []namespaces.Kind{namespaces.PID, namespaces.IPC}

// errNoHostPID: containerd reports pid 0 for the task.
var errNoHostPID = errors.New("containerd reports no process for the task")

// pinned tells whether container id has pins: only those are checked.
func (v *verifier) pinned(id string) bool {
	_, pid := v.pins.Path(id, namespaces.PID)
	_, ipc := v.pins.Path(id, namespaces.IPC)
	return pid || ipc
}

// read reads the namespaces of process pid now.
func (v *verifier) read(pid uint32) *taskRead {
	r := &taskRead{pid: pid}
	if pid == 0 {
		r.err = errNoHostPID
	} else {
		r.ids, r.err = v.of(int(pid), readKinds)
	}
	r.at = time.Now()
	return r
}

// taskCreated reads, at once, the init process of a pinned container's new
// task (containerd's TaskCreate event), for its check after the start.
func (v *verifier) taskCreated(id string, pid uint32) {
	if v == nil || !v.pinned(id) {
		return
	}
	r := v.read(pid)
	v.mu.Lock()
	defer v.mu.Unlock()
	for k, old := range v.reads {
		if time.Since(old.at) > readTTL {
			delete(v.reads, k)
		}
	}
	if len(v.reads) >= maxReads {
		return // a burst of creates whose starts did not come: their checks read after the start
	}
	v.reads[id] = r
}

// taskExited notes the exit of a container whose read waits for its check.
func (v *verifier) taskExited(e taskExit) {
	if v == nil || !e.init() {
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if r, ok := v.reads[e.container]; ok {
		r.exit = &e
	}
}

// take hands over the read of container id, if any.
func (v *verifier) take(id string) *taskRead {
	v.mu.Lock()
	defer v.mu.Unlock()
	r := v.reads[id]
	delete(v.reads, id)
	return r
}

// started queues the check of container id, whose start the backend has
// answered. It never blocks.
func (v *verifier) started(id string) {
	if v == nil {
		return
	}
	v.side.submit(chanVerify, func(ctx context.Context) { v.verify(ctx, id, nil, 1) })
}

// verify is the check of container id: the read at its task's creation or,
// without one, a read now (prev: one made by an earlier try), confirmed
// with containerd, and reported. A process that exited before it was read
// is looked for again, a little later, while the event's read may still
// come.
func (v *verifier) verify(ctx context.Context, id string, prev *taskRead, try int) {
	r := v.take(id)
	if r == nil {
		if r = prev; r == nil {
			r = v.readNow(ctx, id)
		}
		if errors.Is(r.err, namespaces.ErrExited) && try < verifyTry && v.subscribed() {
			v.side.later(verifyWait, chanVerify, func(ctx context.Context) { v.verify(ctx, id, r, try+1) })
			return
		}
	}
	v.report(ctx, id, r, v.word(ctx, id, r))
}

// readNow asks containerd for the task's pid and reads it.
func (v *verifier) readNow(ctx context.Context, id string) *taskRead {
	st, err := v.states.TaskState(ctx, id)
	switch {
	case status.Code(err) == codes.NotFound:
		// containerd's CRI deletes a task once it has handled its exit
		return &taskRead{err: fmt.Errorf("its task is gone: %w", namespaces.ErrExited), at: time.Now()}
	case err != nil:
		return &taskRead{err: fmt.Errorf("ask containerd for the task: %w", err), at: time.Now()}
	case st.status == task.Status_STOPPED:
		return &taskRead{pid: st.pid, err: fmt.Errorf("its task had exited: %w", namespaces.ErrExited), at: time.Now()}
	}
	return v.read(st.pid)
}

// word asks containerd about the task after the read: a task deleted after
// its exit has containerd's exit event for its word, if it came.
func (v *verifier) word(ctx context.Context, id string, r *taskRead) taskWord {
	st, err := v.states.TaskState(ctx, id)
	switch {
	case err == nil:
		return taskWord{pid: st.pid, exited: st.status == task.Status_STOPPED, exitedAt: st.exitedAt}
	case status.Code(err) == codes.NotFound && r.exit != nil:
		return taskWord{pid: r.exit.pid, exited: true, exitedAt: r.exit.at}
	}
	return taskWord{err: err}
}

// trusted says whether what was read (r) is the container's init process
// as containerd's later word (w) knows it, and as the host sees it; when it
// is not, why nothing can be concluded. host is the host's PID namespace.
// It fails closed: a read containerd does not confirm, or cannot, is no
// evidence either way.
func trusted(r *taskRead, w taskWord, host namespaces.ID) (reasonKind, string) {
	switch {
	case errors.Is(r.err, errNoHostPID):
		return reasonNotVisible, "containerd reports no host process for the container's task (a VM or user-space-kernel runtime runs it in a kernel of its own)"
	case errors.Is(r.err, namespaces.ErrExited) && w.err == nil && !w.exited && w.pid == r.pid:
		return reasonNotVisible, fmt.Sprintf("containerd's pid %d for the container's task is no process cri-nstarget can see on the host", r.pid)
	case errors.Is(r.err, namespaces.ErrExited):
		return reasonExitedUnread, "the container had exited before cri-nstarget could read its namespaces"
	case r.err != nil && codeOf(r.err) == codes.Unavailable:
		return reasonContainerdUnavailable, fmt.Sprintf("containerd's API did not answer: %v", r.err)
	case r.err != nil:
		return reasonNamespaceOpenFailed, fmt.Sprintf("read the namespaces of pid %d: %v", r.pid, r.err)
	case w.err != nil && status.Code(w.err) == codes.NotFound:
		return reasonExitedUnread, "the container's task was gone before containerd could confirm the process read"
	case w.err != nil:
		return reasonContainerdUnavailable, fmt.Sprintf("confirm the process read with containerd: %v", w.err)
	case w.pid != r.pid:
		return reasonPIDChanged, fmt.Sprintf("the process read was pid %d, and containerd says the task's is %d: it may not have been the container's", r.pid, w.pid)
	case w.exited && !w.exitedAt.After(r.at):
		return reasonPIDChanged, fmt.Sprintf("containerd recorded the task's exit (%s) before pid %d was read (%s): the pid may have named another process by then",
			w.exitedAt.Format(time.RFC3339Nano), r.pid, r.at.Format(time.RFC3339Nano))
	case r.ids[namespaces.PID] == host:
		return reasonNotVisible, fmt.Sprintf("the container's task process (pid %d) is in the host's PID namespace: it is not the container's init as the host sees it (a VM or user-space-kernel runtime runs the container in a kernel of its own)", r.pid)
	}
	return reasonNone, ""
}

// judge is what verification concludes for each namespace to check (want:
// the pin's identity, or why it could not be had) from the read and
// containerd's word: joined, not joined, or unverified, failing closed.
func judge(r *taskRead, w taskWord, host namespaces.ID, want map[string]pinID) map[string]oci.Verification {
	why, reason := trusted(r, w, host)
	out := make(map[string]oci.Verification, len(want))
	for kind, p := range want {
		v := oci.Verification{Stage: stageVerify}
		seen, ok := r.ids[namespaces.Kind(kind)]
		switch {
		case why != reasonNone:
			v.Result, v.ReasonKind, v.Reason = oci.Unverified, string(why), reason
		case p.err != nil:
			v.Result, v.ReasonKind, v.Reason = oci.Unverified, string(reasonPinFailed), fmt.Sprintf("read the pin: %v", p.err)
		case !ok:
			v.Result, v.ReasonKind, v.Reason = oci.Unverified, string(reasonNamespaceOpenFailed), "its "+kind+" namespace was not read"
		case seen == p.id:
			v.Result, v.Inode = oci.Joined, seen.Ino
		default:
			v.Result, v.Inode, v.ReasonKind = oci.NotJoined, seen.Ino, string(reasonNotJoined)
			v.Reason = fmt.Sprintf("its init process is in %s:%s, and its spec names the target's %s:%s: the runtime did not join the namespace path", kind, seen, kind, p.id)
		}
		out[kind] = v
	}
	return out
}

// pinID is a pin's namespace identity, or why it could not be read.
type pinID struct {
	id  namespaces.ID
	err error
}

// pinnedAtCreate is the identity of the namespace the create pinned, as
// its record says: never the pin's path read now, which names another file
// once the pin is released (the container removed while its check waited
// on the side queue) and would prove a joined container not joined. Every
// namespace is on the one nsfs device, the host's (host).
func pinnedAtCreate(ns oci.NamespaceRecord, host namespaces.ID) pinID {
	if ns.Inode == 0 {
		return pinID{err: errors.New("the record names no inode for the pinned namespace")}
	}
	return pinID{id: namespaces.ID{Dev: host.Dev, Ino: ns.Inode}}
}

// stageVerify is the stage of what verification saw (metric, log, record).
const stageVerify = "verify"

// errNothingToCheck: the record names no pinned namespace the container
// joins (it fell back at create or start, or has no record).
var errNothingToCheck = errors.New("nothing to check")

// report concludes the check of container id from r and w, against the
// pins its record names, and says it: in the record, the metric, the log
// and an Event. A container proven not joined in strict mode is stopped
// through the backend: its start had already been answered.
func (v *verifier) report(ctx context.Context, id string, r *taskRead, w taskWord) {
	spec, err := v.records.read(ctx, id)
	if err != nil {
		if status.Code(err) != codes.NotFound {
			v.unreported(id, err)
		}
		return
	}
	rec, ok, err := oci.ParseRecord(spec.Annotations)
	if err != nil || !ok {
		return
	}
	want := map[string]pinID{}
	for _, kind := range []string{string(namespaces.PID), string(namespaces.IPC)} {
		// a namespace checked already (by the catch-up after a restart of
		// the shim, as well as by its start) is said once
		if ns, ok := rec.Namespaces[kind]; ok && ns.Result == oci.Targeted && ns.Path != "" && ns.Verify == nil {
			want[kind] = pinnedAtCreate(ns, v.host)
		}
	}
	if len(want) == 0 {
		return
	}
	vs := judge(r, w, v.host, want)
	c := checked{id: id, name: spec.Annotations[criNameAnnotation], rec: rec, vs: vs}
	if c.name == "" {
		c.name = id
	}
	if v.strict && c.notJoined() {
		c.stopErr = v.stop(ctx, id)
		c.stopped = c.stopErr == nil
	}
	err = v.records.edit(ctx, id, func(spec *specs.Spec) ([]oci.Opt, error) {
		rec, ok, err := oci.ParseRecord(spec.Annotations)
		if err != nil || !ok {
			return nil, errNothingToCheck
		}
		for kind, vf := range vs {
			vf.Stopped = c.stopped && vf.Result == oci.NotJoined
			ns := rec.Namespaces[kind]
			ns.Verify = &vf
			rec.Namespaces[kind] = ns
		}
		return []oci.Opt{oci.WithRecord(rec)}, nil
	})
	if err != nil && !errors.Is(err, errNothingToCheck) {
		c.recordErr = err
	}
	if c.notJoined() {
		v.learn.learn(rec.RuntimeHandler, fmt.Sprintf("container %s started outside the %s namespace its spec named", c.name, strings.Join(c.kinds(oci.NotJoined), " and ")))
	}
	v.reporter.verified(c)
}

// stop stops container id through the backend at once (strict mode, not
// joined): the kubelet sees it exit, and does not restart an ephemeral
// container.
func (v *verifier) stop(ctx context.Context, id string) error {
	_, err := v.cri.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0})
	return err
}

// unreported says, in the metric and the log, that the check of container
// id concluded nothing because its record could not be read.
func (v *verifier) unreported(id string, err error) {
	for _, kind := range []namespaces.Kind{namespaces.PID, namespaces.IPC} {
		if _, ok := v.pins.Path(id, kind); ok {
			v.reporter.targeting(string(kind), stageVerify, oci.Unverified, whySpecNotUpdated(err))
		}
	}
	v.log.WithError(err).WithField("container", id).Warn("verify: the container's record could not be read; whether it joined its target is not known")
}

// checked is one container's check, as it is reported.
type checked struct {
	id, name  string
	rec       oci.Record // as read before the check
	vs        map[string]oci.Verification
	stopped   bool  // strict mode stopped it
	stopErr   error // strict mode could not stop it
	recordErr error // the record could not be written
}

// kinds are the namespaces whose check has result, in order.
func (c checked) kinds(result string) []string {
	var out []string
	for _, k := range []string{string(namespaces.PID), string(namespaces.IPC)} {
		if v, ok := c.vs[k]; ok && v.Result == result {
			out = append(out, k)
		}
	}
	return out
}

func (c checked) notJoined() bool { return len(c.kinds(oci.NotJoined)) > 0 }

// verified says what the check of a container saw: one metric per
// namespace checked, a log line, and an Event on the pod.
func (r reporter) verified(c checked) {
	fields := logrus.Fields{"container": c.id, "name": c.name, "target": c.rec.Target, "stage": stageVerify}
	level := logrus.InfoLevel
	for _, kind := range slices.Sorted(func(yield func(string) bool) {
		for k := range c.vs {
			if !yield(k) {
				return
			}
		}
	}) {
		v := c.vs[kind]
		result := v.Result
		if c.stopped && v.Result == oci.NotJoined {
			result = resultRefused
		}
		why := reasonKind(v.ReasonKind)
		if why == "" {
			why = reasonNone
		}
		r.targeting(kind, stageVerify, result, why)
		fields[kind] = v.Result
		if v.Inode != 0 {
			fields[kind+"_inode"] = v.Inode
		}
		if v.Reason != "" {
			fields[kind+"_reason"] = v.Reason
		}
		if v.Result != oci.Joined {
			level = logrus.WarnLevel
		}
	}
	if c.rec.RuntimeHandler != "" {
		fields["runtime_handler"] = c.rec.RuntimeHandler
	}
	entry := r.log.WithFields(fields)
	if c.stopErr != nil {
		entry = entry.WithField("stop_error", c.stopErr.Error())
	}
	if c.recordErr != nil {
		entry = entry.WithField("record_error", c.recordErr.Error())
	}
	entry.Log(level, "verified after start: whether the container's init process is in the namespaces its spec was pointed at")
	r.eventOf(verifiedEvent(c))
}
