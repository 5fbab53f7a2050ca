package server

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/containerd/containerd/api/types/task"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

func TestDiedWith(t *testing.T) {
	t0 := time.Now()
	target := taskExit{status: 3, at: t0}
	for _, tc := range []struct {
		desc string
		d    taskExit
		want bool
	}{
		{"killed as the target exited", taskExit{status: 137, at: t0.Add(-2 * time.Millisecond)}, true},
		{"killed, reaped after the target", taskExit{status: 137, at: t0.Add(500 * time.Millisecond)}, true},
		{"killed a minute before", taskExit{status: 137, at: t0.Add(-time.Minute)}, false},
		{"exited by itself", taskExit{status: 0, at: t0}, false},
		{"terminated (SIGTERM)", taskExit{status: 143, at: t0}, false},
	} {
		if got := diedWith(target, tc.d); got != tc.want {
			t.Errorf("%s: diedWith = %v, want %v", tc.desc, got, tc.want)
		}
	}
}

// A debugger pinned in its target's PID namespace dies with the target: on
// the target's exit (containerd's event), with the namespace left without
// an init and the debugger killed (137) within a second, the shim posts a
// Warning TargetExited on the pod, naming both and the target's exit, and
// marks the record. Once: a catch-up afterwards (as after a restart of the
// shim) finds the mark and posts nothing more.
func TestTargetExited(t *testing.T) {
	for _, tc := range []struct {
		desc        string
		debugExit   uint32
		debugAt     time.Duration // from the target's exit
		nsHasInit   bool
		debugFirst  bool // the debugger's exit event comes before the target's (the kernel's order)
		want        bool
		fromBackend bool // the debugger's exit is not in an event: from the CRI's status
	}{
		{desc: "killed with its target", debugExit: 137, debugAt: -3 * time.Millisecond, debugFirst: true, want: true},
		{desc: "killed, its exit event after the target's", debugExit: 137, debugAt: -3 * time.Millisecond, want: true},
		{desc: "killed, its exit only in the CRI", debugExit: 137, debugAt: -3 * time.Millisecond, fromBackend: true, want: true},
		{desc: "exited by itself before", debugExit: 0, debugAt: -10 * time.Second, debugFirst: true},
		{desc: "the target was not the namespace's init", debugExit: 137, debugAt: -3 * time.Millisecond, nsHasInit: true, debugFirst: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r, _, _, s := withChecks(t, newRig, false)
			id := r.pidDebugger(t)
			r.markChecked(t, id) // as its start's check did
			r.live = tc.nsHasInit
			t0 := time.Now().Truncate(time.Microsecond)
			target := taskExit{container: "app1", process: "app1", pid: 4, status: 3, at: t0}
			debug := taskExit{container: id, process: id, pid: 5, status: tc.debugExit, at: t0.Add(tc.debugAt)}
			r.backend.setStatus("app1", &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: 3, FinishedAt: t0.UnixNano()})
			r.backend.setStatus(id, &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: int32(tc.debugExit), FinishedAt: debug.at.UnixNano()})
			events := r.server.after
			switch {
			case tc.fromBackend:
				events.taskExited(target)
			case tc.debugFirst:
				events.taskExited(debug)
				events.taskExited(target)
			default:
				events.taskExited(target)
				events.taskExited(debug)
			}
			if !tc.want {
				time.Sleep(100 * time.Millisecond)
				r.server.after.catchUp(context.Background())
				if got := s.posted(); len(got) != 0 {
					t.Errorf("posted %+v; the debugger did not die with its target", got)
				}
				return
			}
			waitFor(t, "the Warning", func() bool { return len(s.posted()) == 1 })
			e := s.posted()[0]
			want := "Target container app exited (exit code 3), and the kernel killed container debugger with it: debugger ran in app's pid namespace, " +
				"and when a PID namespace's init (here app's process) exits, every other process in it is killed. That is why debugger ended with exit code 137."
			if !e.Warning || e.Reason != eventTargetExited || e.Message != want || e.Container != "debugger" {
				t.Errorf("posted %+v\nwant Warning TargetExited %q", e, want)
			}
			if te := r.record(t, id).TargetExited; te == nil || te.ExitCode != 3 || !strings.HasPrefix(te.At, t0.UTC().Format("2006-01-02T15:04:05")) {
				t.Errorf("record's targetExited = %+v, want exit code 3 at %s", te, t0.UTC())
			}
			// a restart of the shim: nothing watched, the catch-up looks again
			r.restart(t)
			r.server.after.catchUp(context.Background())
			time.Sleep(50 * time.Millisecond)
			if got := s.posted(); len(got) != 1 {
				t.Errorf("posted %d events after the catch-up; want the one, once", len(got))
			}
		})
	}
}

// The shim was not running (or not reading containerd's events) when the
// target exited: the catch-up after it subscribes again finds the debugger
// killed with it, and posts the Warning, once.
func TestTargetExitedWhileAway(t *testing.T) {
	r, _, _, s := withChecks(t, newRig, false)
	id := r.pidDebugger(t)
	r.markChecked(t, id)
	r.live = false
	t0 := time.Now()
	r.backend.setStatus("app1", &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: 3, FinishedAt: t0.UnixNano()})
	r.backend.setStatus(id, &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: 137, FinishedAt: t0.Add(-time.Millisecond).UnixNano()})
	r.restart(t)
	for range 2 {
		r.server.after.catchUp(context.Background())
	}
	if got := s.posted(); len(got) != 1 || got[0].Reason != eventTargetExited {
		t.Errorf("posted %+v, want one TargetExited", got)
	}
}

// A debugger removed is forgotten: the target's exit afterwards looks at
// nothing.
func TestExitWatchForgets(t *testing.T) {
	r := newRig(t, false)
	id := r.pidDebugger(t)
	x := r.server.after.exits
	if x.targetOf[id] != "app1" || !x.joined["app1"][id] {
		t.Fatalf("watch: %v %v, want %s pinned in app1's namespace", x.targetOf, x.joined, id)
	}
	if _, err := runtimeapi.NewRuntimeServiceClient(r.shim).RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if len(x.targetOf)+len(x.joined)+len(x.exits) != 0 {
		t.Errorf("after the removal: %v %v %v, want nothing kept", x.targetOf, x.joined, x.exits)
	}
}

// A start that was in containerd when it restarted: the kubelet was told of
// a reset connection, so no start the shim answered queues the check, and
// the container runs once containerd has recovered it. The catch-up after
// the subscription first finds it not yet running, and looks again until it
// runs: it is checked, and its Event posted.
func TestCatchUpStartMissed(t *testing.T) {
	r, rd, st, s := withChecks(t, newRig, false)
	id := r.pidDebugger(t)
	r.backend.setStatus(id, &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_CREATED})
	if again := r.server.after.scan(context.Background()); !again {
		t.Fatal("scan: a pinned container not yet checked and not running, want it looked at again")
	}
	r.server.after.catchUp(context.Background())
	// containerd has recovered the task: it runs
	st.set(id, taskState{pid: 777, status: task.Status_RUNNING})
	rd.set(777, map[namespaces.Kind]namespaces.ID{namespaces.PID: targetPID})
	r.backend.setStatus(id, &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_RUNNING})
	if v := r.verified(t, id, "pid"); v.Result != oci.Joined {
		t.Errorf("verify = %+v, want joined", v)
	}
	waitFor(t, "the Event", func() bool { return len(s.posted()) == 1 })
	if e := s.posted()[0]; e.Reason != eventTargeted {
		t.Errorf("posted %+v, want Normal Targeted", e)
	}
	if again := r.server.after.scan(context.Background()); again {
		t.Error("scan after the check: want nothing more to see")
	}
}

// A debugger that ran and exited while the shim was not reading containerd's
// events, its start not answered by the shim: the catch-up checks it all
// the same, and the check says what it could see: that it had exited.
func TestCatchUpExitedUnchecked(t *testing.T) {
	r, _, st, s := withChecks(t, newRig, false)
	id := r.pidDebugger(t)
	st.set(id, taskState{pid: 777, status: task.Status_STOPPED, exitedAt: time.Now()})
	r.backend.setStatus(id, &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED, FinishedAt: time.Now().UnixNano()})
	r.server.after.catchUp(context.Background())
	if v := r.verified(t, id, "pid"); v.Result != oci.Unverified {
		t.Errorf("verify = %+v, want unverified", v)
	}
	waitFor(t, "the Event", func() bool { return len(s.posted()) == 1 })
	if e := s.posted()[0]; e.Reason != eventNotVerified {
		t.Errorf("posted %+v, want Warning TargetNotVerified", e)
	}
}

// markChecked writes into container id's record what the check after its
// start would have: each targeted namespace seen joined.
func (r *rig) markChecked(t *testing.T, id string) {
	t.Helper()
	err := r.server.target.records.edit(context.Background(), id, func(spec *specs.Spec) ([]oci.Opt, error) {
		rec, _, err := oci.ParseRecord(spec.Annotations)
		if err != nil {
			return nil, err
		}
		for k, ns := range rec.Namespaces {
			if ns.Result == oci.Targeted {
				ns.Verify = &oci.Verification{Result: oci.Joined, Stage: stageVerify, Inode: ns.Inode}
				rec.Namespaces[k] = ns
			}
		}
		return []oci.Opt{oci.WithRecord(rec)}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// pidDebugger makes, through the shim, a debug container in pod sb1 whose
// PID namespace targets app1, a running container of that pod.
func (r *rig) pidDebugger(t *testing.T) string {
	t.Helper()
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	id, err := r.create(t, withPod(createReq("sb1", pidTarget("app1"))))
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// The target exits, and its exit is handled, between the catch-up's
// question of its status (running) and the catch-up's watch of its
// debugger: the Warning is posted all the same.
func TestCatchUpExitBetweenStatusAndWatch(t *testing.T) {
	r, _, _, s := withChecks(t, newRig, false)
	id := r.pidDebugger(t)
	r.markChecked(t, id)
	r.live = false
	r.restart(t) // a restart of the shim
	r.backend.setStatus("app1", &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_RUNNING})
	r.backend.setStatus(id, &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_RUNNING})
	var once sync.Once
	r.backend.onStatus = func(c string) {
		if c != "app1" {
			return
		}
		once.Do(func() { // answered running; the target exits now, and its exit is handled
			t0 := time.Now()
			r.backend.setStatus("app1", &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: 3, FinishedAt: t0.UnixNano()})
			r.backend.setStatus(id, &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: 137, FinishedAt: t0.UnixNano()})
			r.server.after.taskExited(taskExit{container: "app1", process: "app1", pid: 4, status: 3, at: t0})
		})
	}
	r.server.after.scan(context.Background())
	waitFor(t, "the Warning", func() bool { return len(s.posted()) == 1 })
	if e := s.posted()[0]; e.Reason != eventTargetExited {
		t.Errorf("posted %+v, want Warning TargetExited", e)
	}
}

// A debugger removed while the catch-up looks at it is not watched after
// its removal: removed while the catch-up asks for its own status (after
// its record was read, before its watch is registered: the watch finds its
// pins gone), or for its target's (after the watch: the removal forgets it).
func TestCatchUpNoWatchAfterForget(t *testing.T) {
	for _, at := range []string{"debugger", "target"} {
		t.Run("removed while the catch-up asks for the "+at+"'s status", func(t *testing.T) {
			r, _, _, _ := withChecks(t, newRig, false)
			id := r.pidDebugger(t)
			r.markChecked(t, id)
			r.restart(t) // a restart of the shim
			x := r.server.after.exits
			r.backend.setStatus("app1", &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_RUNNING})
			r.backend.setStatus(id, &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_RUNNING})
			asked := map[string]string{"debugger": id, "target": "app1"}[at]
			var once sync.Once
			r.backend.onStatus = func(c string) {
				if c != asked {
					return
				}
				once.Do(func() {
					if _, err := runtimeapi.NewRuntimeServiceClient(r.shim).RemoveContainer(context.Background(), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
						t.Error(err)
					}
				})
			}
			r.server.after.scan(context.Background())
			x.mu.Lock()
			defer x.mu.Unlock()
			if len(x.targetOf)+len(x.joined) != 0 {
				t.Errorf("after the removal and the catch-up: watched %v %v, want nothing", x.targetOf, x.joined)
			}
		})
	}
}

// The record is what makes the Warning once: a second judgement of the
// same exit (the event's and a catch-up's, each past its own watch) finds
// the record marked and posts nothing more, and leaves the mark as it was.
func TestTargetExitedToldOnce(t *testing.T) {
	r, _, _, s := withChecks(t, newRig, false)
	id := r.pidDebugger(t)
	r.markChecked(t, id)
	r.live = false
	t0 := time.Now().Truncate(time.Microsecond)
	target := taskExit{container: "app1", process: "app1", pid: 4, status: 3, at: t0}
	debug := taskExit{container: id, process: id, pid: 5, status: 137, at: t0}
	x := r.server.after.exits
	x.judge(context.Background(), id, target, debug)
	later := target
	later.status, later.at = 4, t0.Add(time.Millisecond)
	x.judge(context.Background(), id, later, debug)
	if got := s.posted(); len(got) != 1 {
		t.Errorf("posted %d events for one exit judged twice, want 1: %+v", len(got), got)
	}
	if te := r.record(t, id).TargetExited; te == nil || te.ExitCode != 3 {
		t.Errorf("record's targetExited = %+v, want the first judgement's (exit code 3)", te)
	}
}
