//go:build integration

package integration

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// (a) A debug container with pid TARGET sees the target's processes and is
// in its PID namespace, though the pod gives each container its own; and the
// shim, not containerd, did it.
func TestPIDTarget(t *testing.T) {
	s := startShim(t)
	c := shimCRI(s)
	p := runPod(t, c, ownMode)
	app := run(t, c, p, "app", pidOwn, "sleep", "3601")
	dbg := run(t, c, p, "debug", targetOf(app))

	if ps := execIn(t, c, dbg, "ps", "-o", "pid,args"); !strings.Contains(ps, "sleep 3601") {
		t.Errorf("debug container does not see the app's process:\n%s", ps)
	}
	appNS, dbgNS := nsInside(t, c, app, "pid"), nsInside(t, c, dbg, "pid")
	if appNS != dbgNS {
		t.Errorf("debug pid namespace %s, app's %s", dbgNS, appNS)
	}
	if podNS := nsOfPid(t, sandboxPid(t, p.id), "pid"); dbgNS == podNS {
		t.Errorf("debug container is in the pod's pid namespace %s, not the app's", podNS)
	}

	ci := direct.Info(t, dbg)
	if got := ci.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(); got != runtimeapi.NamespaceMode_POD {
		t.Errorf("containerd received pid mode %v, want POD: the shim must do the targeting", got)
	}
	pin := s.StateDir() + "/pins/" + dbg + "/pid"
	if path := nsPath(ci, "pid"); path != pin {
		t.Errorf("spec pid namespace path = %q, want the shim's pin %q", path, pin)
	}
	rec := ci.Record(t)
	if r := rec.Namespaces["pid"]; rec.Target != app || r.Result != oci.Targeted || "pid:["+strconv.FormatUint(r.Inode, 10)+"]" != appNS {
		t.Errorf("record = %+v, want targeted at %s with inode of %s", rec, app, appNS)
	}
	// what the shim saw once it ran: its init process in the app's namespace
	if v := verified(t, dbg, "pid"); v.Result != oci.Joined || "pid:["+strconv.FormatUint(v.Inode, 10)+"]" != appNS {
		t.Errorf("check after the start = %+v, want joined in %s", v, appNS)
	}
}

// (b) IPC TARGET: the debug container's IPC namespace is the target's, not
// the pod's. containerd puts every container in the pod's IPC namespace, so
// the app first moves to one of its own (unshare -i, which needs SYS_ADMIN):
// only real targeting can then put the debug container beside it.
func TestIPCTarget(t *testing.T) {
	s := startShim(t)
	c := shimCRI(s)
	p := runPod(t, c, ownMode)
	app := runOwnIPC(t, c, p, pidOwn, "", "exec sleep 3602")
	podIPC := nsOfPid(t, sandboxPid(t, p.id), "ipc")
	var appIPC string
	eventually(t, "the app to enter its own ipc namespace", func() bool {
		appIPC = nsOfPid(t, pidOf(t, app), "ipc")
		return appIPC != podIPC
	})
	dbg := run(t, c, p, "debug", &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, Ipc: runtimeapi.NamespaceMode_TARGET, TargetId: app})

	if dbgIPC := nsInside(t, c, dbg, "ipc"); dbgIPC != appIPC {
		t.Errorf("debug ipc namespace %s, want the app's %s (the pod's is %s)", dbgIPC, appIPC, podIPC)
	}
	ci := direct.Info(t, dbg)
	if got := ci.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetIpc(); got != runtimeapi.NamespaceMode_POD {
		t.Errorf("containerd received ipc mode %v, want POD", got)
	}
	if path, pin := nsPath(ci, "ipc"), s.StateDir()+"/pins/"+dbg+"/ipc"; path != pin {
		t.Errorf("spec ipc path = %q, want the pin %q", path, pin)
	}
	r := ci.Record(t).Namespaces["ipc"]
	if r.Result != oci.Targeted || r.Shm != oci.ShmPod || len(r.Shares) != 3 {
		t.Errorf("ipc record = %+v, want targeted, sharing sysv, mqueue and the pod's /dev/shm", r)
	}
	if v := verified(t, dbg, "ipc"); v.Result != oci.Joined || "ipc:["+strconv.FormatUint(v.Inode, 10)+"]" != appIPC {
		t.Errorf("check after the start = %+v, want joined in %s", v, appIPC)
	}
	// the app's /dev/shm is the pod's: the debug container's is left as is
	if m := specMount(ci, "/dev/shm"); m.Source == "" || m.Source != r.PodShm {
		t.Errorf("spec /dev/shm = %+v, want the pod's %q", m, r.PodShm)
	}
}

// (d) The target stops between create and start: the default shim runs the
// debug container in the pod's PID namespace and says why; a strict shim
// fails StartContainer and leaves nothing behind.
func TestTargetStoppedBeforeStart(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(map[bool]string{false: "fallback", true: "strict"}[strict], func(t *testing.T) {
			s := startShimStrict(t, strict)
			c := shimCRI(s)
			p := runPod(t, c, ownMode)
			app := run(t, c, p, "app", pidOwn)
			dbg := mustCreate(t, c, p, "debug", targetOf(app))
			if _, err := c.Runtime.StopContainer(ctx(t), &runtimeapi.StopContainerRequest{ContainerId: app, Timeout: 1}); err != nil {
				t.Fatal(err)
			}
			_, err := c.Runtime.StartContainer(ctx(t), &runtimeapi.StartContainerRequest{ContainerId: dbg})
			if strict {
				if status.Code(err) != codes.FailedPrecondition {
					t.Fatalf("strict StartContainer: %v, want FailedPrecondition", err)
				}
				if containerIDs(t)[dbg] {
					t.Error("strict: the debug container is left in containerd")
				}
				if m := mountsUnder(t, s.StateDir()); len(m) > 0 {
					t.Errorf("strict: pins left: %v", m)
				}
				return
			}
			if err != nil {
				t.Fatalf("StartContainer: %v", err)
			}
			podNS := nsOfPid(t, sandboxPid(t, p.id), "pid")
			if got := nsInside(t, c, dbg, "pid"); got != podNS {
				t.Errorf("debug pid namespace %s, want the pod's %s", got, podNS)
			}
			r := direct.Info(t, dbg).Record(t).Namespaces["pid"]
			if r.Result != oci.Fallback || r.Stage != "start" || !strings.Contains(r.Reason, "no init") {
				t.Errorf("record = %+v, want a fallback at start saying why", r)
			}
		})
	}
}

// (e) The target is killed after CreateContainer and an unrelated process
// takes its PID before StartContainer: the debug container must never land in
// that process's namespace. (containerd alone, pointing at /proc/<pid>/ns/pid,
// would put it in the host's.) Without the impostor the test would show
// nothing: under CI it fails when the PID cannot be re-occupied.
func TestPIDReuseBetweenCreateAndStart(t *testing.T) {
	s := startShim(t)
	c := shimCRI(s)
	p := runPod(t, c, ownMode)
	app := run(t, c, p, "app", pidOwn)
	dbg := mustCreate(t, c, p, "debug", targetOf(app))

	pid := pidOf(t, app)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the app to exit", func() bool {
		return direct.Info(t, app).Pid == 0 || syscall.Kill(pid, 0) == syscall.ESRCH
	})
	eventually(t, "pid to be free", func() bool { return syscall.Kill(pid, 0) == syscall.ESRCH })
	reoccupy(t, pid) // under CI, a pid that cannot be re-occupied fails the test
	hostNS := nsOfPid(t, pid, "pid")

	mustStart(t, c, dbg)
	got := nsInside(t, c, dbg, "pid")
	if got == hostNS {
		t.Fatalf("debug container joined the namespace of the unrelated process %d (%s)", pid, hostNS)
	}
	if podNS := nsOfPid(t, sandboxPid(t, p.id), "pid"); got != podNS {
		t.Errorf("debug pid namespace %s, want the pod's %s (fallback)", got, podNS)
	}
	if ps := execIn(t, c, dbg, "ps", "-o", "args"); strings.Contains(ps, "sleep 599") {
		t.Errorf("debug container sees the impostor:\n%s", ps)
	}
}

// takePid starts `sleep` with exactly pid, by setting ns_last_pid; it retries
// a few times in case something else forks first. The process is killed when
// t ends.
func takePid(t *testing.T, pid int) *exec.Cmd {
	t.Helper()
	for attempt := 0; attempt < 50; attempt++ {
		if err := writeFile("/proc/sys/kernel/ns_last_pid", strconv.Itoa(pid-1)); err != nil {
			t.Skipf("cannot set ns_last_pid: %v", err)
		}
		cmd := exec.Command("sleep", "599")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if cmd.Process.Pid == pid {
			t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
			time.Sleep(50 * time.Millisecond) // let it exec
			return cmd
		}
		cmd.Process.Kill()
		cmd.Wait()
	}
	return nil
}

// The containerd API (specs, task pids) cannot be reached while its CRI can:
// by default the debug container runs in the pod's namespace, and the
// warning in the log and the metric say why; on the NRI path the record
// says so too (it is written inside containerd's create), on the Update path
// there is none (it is written through that API); strict mode answers
// Unavailable and leaves nothing.
func TestContainerdAPIUnreachable(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(map[bool]string{false: "fallback", true: "strict"}[strict], func(t *testing.T) {
			s := startShimStrict(t, strict, "--containerd-address", filepath.Join(tmp, "no-containerd.sock"))
			c := shimCRI(s)
			p := runPod(t, c, ownMode)
			app := run(t, c, p, "app", pidOwn)
			before := containerIDs(t)
			dbg, err := createIn(t, c, p, "debug", targetOf(app))
			if strict {
				if status.Code(err) != codes.Unavailable {
					t.Fatalf("strict create: %v, want Unavailable", err)
				}
				if after := containerIDs(t); len(after) != len(before) {
					t.Errorf("strict: containers %d before, %d after: one is left", len(before), len(after))
				}
				return
			}
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			mustStart(t, c, dbg)
			podNS := nsOfPid(t, sandboxPid(t, p.id), "pid")
			if got := nsInside(t, c, dbg, "pid"); got != podNS {
				t.Errorf("debug pid namespace %s, want the pod's %s", got, podNS)
			}
			rec, ok, _ := oci.ParseRecord(direct.Info(t, dbg).RuntimeSpec.Annotations)
			switch {
			case shimsUseNRI() && (!ok || rec.Via != "nri" || rec.Namespaces["pid"].ReasonKind != "containerd_unavailable"):
				t.Errorf("NRI path: record %+v (ok %v), want the fallback with reason containerd_unavailable, written through NRI", rec, ok)
			case !shimsUseNRI() && ok:
				t.Error("Update path: an annotation was written although the containerd API is unreachable")
			}
			// written once the create's answer has gone back (the side queue)
			eventually(t, "the fallback warning with reason_kind=containerd_unavailable in the shim's log", func() bool {
				log, _ := os.ReadFile(s.LogPath())
				return strings.Contains(string(log), "targeting fell back") && strings.Contains(string(log), "reason_kind=containerd_unavailable")
			})
		})
	}
}

// Ids as people type them (crictl start 4f2a): StartContainer and
// RemoveContainer with a unique prefix of a targeted container's id check
// and release its pin as the full id would.
func TestIDPrefixes(t *testing.T) {
	s := startShim(t)
	c := shimCRI(s)
	p := runPod(t, c, ownMode)
	app := run(t, c, p, "app", pidOwn)
	dbg := mustCreate(t, c, p, "debug", targetOf(app))
	if _, err := c.Runtime.StopContainer(ctx(t), &runtimeapi.StopContainerRequest{ContainerId: app, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	// the target's PID namespace lost its init: started by prefix, the debug
	// container must fall back at start, not fail in runc
	if _, err := c.Runtime.StartContainer(ctx(t), &runtimeapi.StartContainerRequest{ContainerId: dbg[:12]}); err != nil {
		t.Fatalf("StartContainer(%s): %v", dbg[:12], err)
	}
	if r := direct.Info(t, dbg).Record(t).Namespaces["pid"]; r.Result != oci.Fallback || r.Stage != "start" {
		t.Errorf("started by prefix after the target exited: record %+v, want a fallback at start", r)
	}
	pins := filepath.Join(s.StateDir(), "pins")
	if m := mountsUnder(t, pins); len(m) != 1 {
		t.Fatalf("pins before removal: %v", m)
	}
	if _, err := c.Runtime.StopContainer(ctx(t), &runtimeapi.StopContainerRequest{ContainerId: dbg, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Runtime.RemoveContainer(ctx(t), &runtimeapi.RemoveContainerRequest{ContainerId: dbg[:12]}); err != nil {
		t.Fatalf("RemoveContainer(%s): %v", dbg[:12], err)
	}
	if m := mountsUnder(t, pins); len(m) != 0 {
		t.Errorf("pins after RemoveContainer by prefix: %v", m)
	}
}
