package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/api/types/task"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// The namespaces of the rig: the pins of a create are the identities the
// rig's openNS gave the target's namespaces (pid first, then ipc), the host
// another.
var (
	targetPID = namespaces.ID{Dev: 4, Ino: 4026530000}
	targetIPC = namespaces.ID{Dev: 4, Ino: 4026530001}
	hostPID   = namespaces.ID{Dev: 4, Ino: 4026531836}
	ownPID    = namespaces.ID{Dev: 4, Ino: 4026532999} // a namespace of the container's own
)

// pinStat is namespaces.Stat for the rig's pin paths.
func pinStat(path string) (namespaces.ID, error) {
	switch {
	case strings.HasSuffix(path, "/pid"):
		return targetPID, nil
	case strings.HasSuffix(path, "/ipc"):
		return targetIPC, nil
	}
	return namespaces.ID{}, fmt.Errorf("stat %s: no such file", path)
}

// fakeStates is containerd's word on the tasks: NotFound for a container
// it has none for.
type fakeStates struct {
	mu sync.Mutex
	m  map[string]taskState
}

func (f *fakeStates) TaskState(_ context.Context, id string) (taskState, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.m[id]
	if !ok {
		return taskState{}, status.Errorf(codes.NotFound, "no task for %q", id)
	}
	return st, nil
}

func (f *fakeStates) set(id string, st taskState) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[id] = st
}

// reader is namespaces.Of for the tests: what each pid is in, or gone.
type reader struct {
	mu    sync.Mutex
	ids   map[int]map[namespaces.Kind]namespaces.ID
	gate  chan struct{} // when set, a read waits for it
	reads int
}

func (f *reader) of(pid int, _ []namespaces.Kind) (map[namespaces.Kind]namespaces.ID, error) {
	f.mu.Lock()
	gate := f.gate
	f.mu.Unlock()
	if gate != nil {
		<-gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	ids, ok := f.ids[pid]
	if !ok {
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, namespaces.ErrExited)
	}
	return ids, nil
}

func (f *reader) set(pid int, ids map[namespaces.Kind]namespaces.ID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if ids == nil {
		delete(f.ids, pid)
		return
	}
	f.ids[pid] = ids
}

// withChecks is a rig (made by newRig, its deps edited by edits) whose
// shim has the check after a start: processes are read through the
// returned reader, containerd's word is the returned states', the host's
// PID namespace hostPID, the pins' identities pinStat's; Events go to the
// returned sink.
func withChecks(t testing.TB, newRig rigMaker, strict bool, edits ...func(*deps)) (*rig, *reader, *fakeStates, *sink) {
	rd := &reader{ids: map[int]map[namespaces.Kind]namespaces.ID{}}
	st := &fakeStates{m: map[string]taskState{}}
	s := &sink{}
	r := newRig(t, strict, append(slices.Clone(edits), func(d *deps) {
		d.states, d.host, d.kernel.of = st, hostPID, rd.of
	})...)
	r.kernel.stat = pinStat
	r.events = s
	return r, rd, st, s
}

// withHandlers is an edit of a rig's deps that gives its shim the runtime
// handlers' table, configured as configured, kept in a file of the test's;
// *h (if h is not nil) is that table once the rig is built.
func withHandlers(t *testing.T, configured string, h **handlers) func(*deps) {
	file := t.TempDir() + "/runtime-handlers.json"
	return func(d *deps) {
		log := logrus.New()
		log.SetLevel(logrus.PanicLevel)
		d.handlers = newHandlers(d.cri, logrus.NewEntry(log), configured, file)
		if h != nil {
			*h = d.handlers
		}
	}
}

// handlersTable is a runtime handlers' table on the rig's backend, as a
// restarted shim builds it, configured as configured (the shim keeps its
// own).
func (r *rig) handlersTable(t *testing.T, configured string) *handlers {
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	return newHandlers(runtimeapi.NewRuntimeServiceClient(r.direct), logrus.NewEntry(log), configured, t.TempDir()+"/runtime-handlers.json")
}

// runPod makes pod sandbox name through the shim, with runtime handler.
func (r *rig) runPod(t *testing.T, name, handler string) {
	t.Helper()
	_, err := runtimeapi.NewRuntimeServiceClient(r.shim).RunPodSandbox(context.Background(), &runtimeapi.RunPodSandboxRequest{
		Config: &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: name}}, RuntimeHandler: handler})
	if err != nil {
		t.Fatal(err)
	}
}

// verified waits for the check of id to be in its record.
func (r *rig) verified(t *testing.T, id, kind string) oci.Verification {
	t.Helper()
	var v *oci.Verification
	waitFor(t, "the check after the start of "+id, func() bool {
		v = r.record(t, id).Namespaces[kind].Verify
		return v != nil
	})
	return *v
}

// What a check concludes from the process read and containerd's later word
// on the task. It fails closed: whatever the namespace read, a read that
// containerd's word does not confirm as the task's init (another pid, an
// exit recorded before the read: the pid may have been reused) concludes
// nothing, and neither does a process on the host that is no container's.
func TestJudge(t *testing.T) {
	t0 := time.Now()
	pinned := map[string]pinID{"pid": {id: targetPID}}
	read := func(pid uint32, ns namespaces.ID) *taskRead {
		return &taskRead{pid: pid, ids: map[namespaces.Kind]namespaces.ID{namespaces.PID: ns}, at: t0}
	}
	gone := func(pid uint32) *taskRead {
		return &taskRead{pid: pid, err: fmt.Errorf("pidfd_open: %w", namespaces.ErrExited), at: t0}
	}
	running := func(pid uint32) taskWord { return taskWord{pid: pid} }
	exited := func(pid uint32, at time.Time) taskWord { return taskWord{pid: pid, exited: true, exitedAt: at} }
	for _, tc := range []struct {
		desc   string
		r      *taskRead
		w      taskWord
		want   map[string]pinID
		result string
		why    reasonKind
	}{
		{"in the target's namespace, running", read(10, targetPID), running(10), pinned, oci.Joined, ""},
		{"in the target's namespace, exited after the read", read(10, targetPID), exited(10, t0.Add(time.Millisecond)), pinned, oci.Joined, ""},
		{"in a namespace of its own: the runtime ignored the path", read(10, ownPID), running(10), pinned, oci.NotJoined, reasonNotJoined},
		{"reused pid: containerd says the task's pid is another", read(10, targetPID), running(11), pinned, oci.Unverified, reasonPIDChanged},
		{"reused pid: containerd recorded the exit before the read", read(10, targetPID), exited(10, t0.Add(-time.Millisecond)), pinned, oci.Unverified, reasonPIDChanged},
		{"reused pid: exit recorded at the read's moment", read(10, targetPID), exited(10, t0), pinned, oci.Unverified, reasonPIDChanged},
		{"reused pid, in another namespace", read(10, ownPID), exited(10, t0.Add(-time.Second)), pinned, oci.Unverified, reasonPIDChanged},
		{"exited before it was read", gone(10), exited(10, t0.Add(-time.Millisecond)), pinned, oci.Unverified, reasonExitedUnread},
		{"task deleted before containerd confirmed", read(10, targetPID), taskWord{err: status.Error(codes.NotFound, "no task")}, pinned, oci.Unverified, reasonExitedUnread},
		{"containerd runs a pid the host does not have", gone(10), running(10), pinned, oci.Unverified, reasonNotVisible},
		{"containerd reports pid 0", &taskRead{err: errNoHostPID, at: t0}, running(0), pinned, oci.Unverified, reasonNotVisible},
		{"the task's process is the host's (a VM's)", read(10, hostPID), running(10), pinned, oci.Unverified, reasonNotVisible},
		{"containerd did not answer", read(10, targetPID), taskWord{err: status.Error(codes.Unavailable, "down")}, pinned, oci.Unverified, reasonContainerdUnavailable},
		{"the pin could not be read", read(10, targetPID), running(10), map[string]pinID{"pid": {err: errors.New("gone")}}, oci.Unverified, reasonPinFailed},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := judge(tc.r, tc.w, hostPID, tc.want)["pid"]
			if got.Result != tc.result || reasonKind(got.ReasonKind) != tc.why || got.Stage != stageVerify {
				t.Errorf("judge = %+v, want %s (%s) at stage verify", got, tc.result, tc.why)
			}
			if (got.Result == oci.Unverified) != (got.Inode == 0) {
				t.Errorf("inode %d with result %s: an inode is what was seen, only when concluded", got.Inode, got.Result)
			}
		})
	}
}

// After a start, the shim checks that the container's init process is in
// the pinned namespaces, and says so: the record (stage verify), the metric,
// and the Normal Targeted Event, now rather than at create, with the
// namespace as readlink prints it inside. The start is answered before the
// check reads anything: the check waits here on a read that is held until
// the start has returned.
func TestVerifyAfterStart(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		m := &fakeMetrics{}
		r, rd, st, s := withChecks(t, newRig, false, withMetrics(m))
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		both := &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, Ipc: runtimeapi.NamespaceMode_TARGET, TargetId: "app1"}
		id, err := r.create(t, withPod(createReq("sb1", both)))
		if err != nil {
			t.Fatal(err)
		}
		if got := s.posted(); len(got) != 0 {
			t.Fatalf("posted at create %+v; what joins is said once seen", got)
		}
		st.set(id, taskState{pid: 777, status: task.Status_RUNNING})
		rd.set(777, map[namespaces.Kind]namespaces.ID{namespaces.PID: targetPID, namespaces.IPC: targetIPC})
		gate := make(chan struct{})
		rd.gate = gate
		if err := r.start(id); err != nil {
			t.Fatal(err)
		}
		close(gate) // the start has been answered; the check may read now
		for kind, ino := range map[string]uint64{"pid": targetPID.Ino, "ipc": targetIPC.Ino} {
			if v := r.verified(t, id, kind); v.Result != oci.Joined || v.Stage != stageVerify || v.Inode != ino {
				t.Errorf("%s verify = %+v, want joined at stage verify, inode %d", kind, v, ino)
			}
		}
		waitFor(t, "the Event", func() bool { return len(s.posted()) == 1 })
		e := s.posted()[0]
		want := "Container debugger joined the pid and ipc namespaces of target container app, verified after it started: its init process is in pid:[4026530000] and ipc:[4026530001] " +
			"(`readlink /proc/self/ns/pid` and `/proc/self/ns/ipc` prints them inside it), pinned by cri-nstarget; it sees app's processes, and it shares app's IPC."
		if e.Warning || e.Reason != eventTargeted || e.Message != want || e.Container != "debugger" {
			t.Errorf("posted %+v, want Normal Targeted %q", e, want)
		}
		for _, o := range []string{"pid/verify/joined/none", "ipc/verify/joined/none"} {
			if !slices.Contains(m.outcomes(), o) {
				t.Errorf("metrics %v, want %s", m.outcomes(), o)
			}
		}
		// checked again (the catch-up after a restart of the shim, as well
		// as its start): said once
		r.server.after.started(id)
		done := make(chan struct{})
		r.server.after.side.submit(chanVerify, func(context.Context) { close(done) })
		<-done
		if got := s.posted(); len(got) != 1 {
			t.Errorf("posted %d events after a second check, want the one", len(got))
		}
	})
}

// A check that runs after the container's pins were released (removed
// while its check waited on the side queue, as under load: the pin's path
// then names a plain file) judges against the namespace the create pinned,
// as its record says: joined, and runc's handler is not learnt as one that
// cannot join.
func TestVerifyAfterPinReleased(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		var h *handlers
		r, rd, st, _ := withChecks(t, newRig, false, withHandlers(t, "", &h))
		r.runPod(t, "sb1", "runc")
		id := r.pidDebugger(t)
		r.kernel.stat = func(string) (namespaces.ID, error) { return namespaces.ID{Dev: 8, Ino: 77}, nil } // released
		st.set(id, taskState{pid: 780, status: task.Status_RUNNING})
		rd.set(780, map[namespaces.Kind]namespaces.ID{namespaces.PID: targetPID})
		if err := r.start(id); err != nil {
			t.Fatal(err)
		}
		if v := r.verified(t, id, "pid"); v.Result != oci.Joined || v.Inode != targetPID.Ino {
			t.Errorf("verify = %+v, want joined in %d", v, targetPID.Ino)
		}
		if why := h.cannot("runc"); why != "" {
			t.Errorf("handler runc learnt as unable to join: %q", why)
		}
	})
}

// A runtime that ignores the namespace path (a VM or user-space-kernel
// runtime; here the fake reads the container in a namespace of its own):
// the Warning TargetNotJoined names the container, the target and the
// pod's runtime handler; the handler is learnt, and the next TARGET create
// in its pods falls back before anything is made. Strict mode stops the
// container through the backend, and the Warning says why it was not
// refused: its start had been answered.
func TestVerifyNotJoined(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) {
			eachPath(t, func(t *testing.T, newRig rigMaker) {
				var h *handlers
				m := &fakeMetrics{}
				r, rd, st, s := withChecks(t, newRig, strict, withHandlers(t, "", &h), withMetrics(m))
				r.runPod(t, "sb1", "vmrun")
				id := r.pidDebugger(t)
				if rec := r.record(t, id); rec.RuntimeHandler != "vmrun" || rec.Namespaces["pid"].Result != oci.Targeted {
					t.Fatalf("record %+v, want pid targeted in a pod of runtime handler vmrun", rec)
				}
				st.set(id, taskState{pid: 778, status: task.Status_RUNNING})
				rd.set(778, map[namespaces.Kind]namespaces.ID{namespaces.PID: ownPID, namespaces.IPC: {Dev: 4, Ino: 5}})
				if err := r.start(id); err != nil {
					t.Fatal(err)
				}
				v := r.verified(t, id, "pid")
				if v.Result != oci.NotJoined || v.Inode != ownPID.Ino || v.ReasonKind != string(reasonNotJoined) || v.Stopped != strict {
					t.Errorf("verify = %+v, want not_joined in %d (stopped: %v)", v, ownPID.Ino, strict)
				}
				waitFor(t, "the Warning", func() bool { return len(s.posted()) == 1 })
				e := s.posted()[0]
				want := "Container debugger was pointed at the pid namespace of target container app, but its init process is in pid:[4026532999], not in app's pid:[4026530000]: " +
					"the pod's runtime handler vmrun did not join the namespace path (VM and user-space-kernel runtimes run the pod in a kernel of their own). It does not see app's processes. " +
					"cri-nstarget falls back before create for runtime handler vmrun from now on; to debug app from inside its namespaces, use a runtime handler that joins namespace paths (runc)."
				if strict {
					want += " Strict targeting stopped debugger: its start had already been answered."
				}
				if !e.Warning || e.Reason != eventNotJoined || e.Message != want {
					t.Errorf("posted %+v\nwant Warning TargetNotJoined %q", e, want)
				}
				r.backend.mu.Lock()
				stopped := slices.Clone(r.backend.stopped)
				r.backend.mu.Unlock()
				if strict != slices.Equal(stopped, []string{id}) {
					t.Errorf("stopped %v (strict %v)", stopped, strict)
				}
				outcome := "pid/verify/not_joined/runtime_not_joined"
				if strict {
					outcome = "pid/verify/refused/runtime_not_joined"
				}
				if !slices.Contains(m.outcomes(), outcome) {
					t.Errorf("metrics %v, want %s", m.outcomes(), outcome)
				}
				if why := h.cannot("vmrun"); !strings.Contains(why, "started outside the pid namespace its spec named") {
					t.Errorf("handler vmrun: %q, want it learnt as unable to join", why)
				}
				// the next TARGET create in a pod of vmrun: a fallback before anything is made
				pinsBefore := r.pinned(id)
				next, err := r.create(t, withPod(createReq("sb1", pidTarget("app1"))))
				if strict {
					if codeOf(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "runtime_cannot_join") {
						t.Fatalf("strict create: %v, want FailedPrecondition runtime_cannot_join", err)
					}
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				if r.pinned(next) || !pinsBefore {
					t.Errorf("pins: the fallback holds some (%v), or the first container lost its (%v)", r.pinned(next), pinsBefore)
				}
				if rec := r.record(t, next).Namespaces["pid"]; rec.Result != oci.Fallback || rec.ReasonKind != string(reasonRuntimeCannotJoin) || !strings.Contains(rec.Reason, "vmrun") {
					t.Errorf("next create's record %+v, want a fallback runtime_cannot_join naming vmrun", rec)
				}
			})
		})
	}
}

// A debugger that prints and exits is gone within milliseconds of its
// start: its process is read as soon as containerd's event for its task's
// creation arrives (the process then waits for its start), and confirmed
// afterwards by containerd's word, its exit, recorded after the read. An
// exit recorded before the read (the pid was free, and may have named
// another process) confirms nothing, whatever namespace was read.
func TestVerifyReadAtTaskCreate(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		exit   time.Duration // containerd's exit time, from the read
		result string
	}{
		{"exited after the read", time.Millisecond, oci.Joined},
		{"exit recorded before the read", -time.Millisecond, oci.Unverified},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r, rd, st, _ := withChecks(t, newRig, false)
			id := r.pidDebugger(t)
			rd.set(779, map[namespaces.Kind]namespaces.ID{namespaces.PID: targetPID, namespaces.IPC: {Dev: 4, Ino: 6}})
			events := r.server.after
			events.taskCreated(id, 779)
			events.taskCreated("not-pinned", 780) // no read: only pinned containers are
			read := r.server.after.verify.reads[id]
			if read == nil || rd.reads != 1 {
				t.Fatalf("reads %d, kept %+v: want the pinned container's process read at its task's creation", rd.reads, read)
			}
			rd.set(779, nil) // it ran and exited
			st.set(id, taskState{pid: 779, status: task.Status_STOPPED, exitedAt: read.at.Add(tc.exit)})
			if err := r.start(id); err != nil {
				t.Fatal(err)
			}
			if v := r.verified(t, id, "pid"); v.Result != tc.result {
				t.Errorf("verify = %+v, want %s", v, tc.result)
			}
		})
	}
}

// A container whose process cannot be seen (exited before it was read,
// here with no event to read it earlier) gets a Warning that says so, never
// a Normal.
func TestVerifyUnseenIsWarning(t *testing.T) {
	r, _, st, s := withChecks(t, newRig, false)
	id := r.pidDebugger(t)
	st.set(id, taskState{pid: 781, status: task.Status_STOPPED, exitedAt: time.Now()})
	if err := r.start(id); err != nil {
		t.Fatal(err)
	}
	if v := r.verified(t, id, "pid"); v.Result != oci.Unverified || v.ReasonKind != string(reasonExitedUnread) {
		t.Errorf("verify = %+v, want unverified exited_unobserved", v)
	}
	waitFor(t, "the Warning", func() bool { return len(s.posted()) == 1 })
	want := "cri-nstarget could not verify that container debugger joined the pid namespace of target container app: debugger had exited before cri-nstarget could look (exited_unobserved). " +
		"Inside debugger, `readlink /proc/self/ns/pid` says which it is in."
	if e := s.posted()[0]; !e.Warning || e.Reason != eventNotVerified || e.Message != want {
		t.Errorf("posted %+v\nwant Warning TargetNotVerified %q", e, want)
	}
}
