//go:build e2e

package e2e

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// crashSleep is how long each instance of the crash-looping app lives
// before it exits 3: long enough for a debug container started while it
// runs to find it alive.
const crashSleep = "8"

// A crash-looping target, the commonest reason to debug. app prints its PID
// namespace, sleeps crashSleep seconds and exits 3; with restartPolicy
// Always the kubelet starts it again at once the first time, then after a
// back-off (10 s, then 20 s, ...). While it waits out a back-off the kubelet
// reports app terminated (waiting, CrashLoopBackOff, only for the moment a
// sync meets the back-off: measured on 1.37). kubectl debug --target=app
// runs while app is in back-off and again while it runs. Each time the
// kubelet sends TARGET with the id of app's latest
// instance, and the debug container either joins it, alive (targeted: in
// that instance's PID namespace, through the shim's pin), or falls back
// with target_not_running when it is dead. The one made while app runs
// sleeps, and dies with app's instance (the kernel kills every process of
// a PID namespace whose init exits): the kubelet shows 137, and the shim's
// Warning TargetExited says why. The pin of an instance joined
// is the debug container's: still held after the instance died, released
// when the kubelet removes the container (here once the pod is deleted).
func TestDebugCrashLoopingTarget(t *testing.T) {
	alongside(t)
	const pod = "crashloop"
	start := time.Now()
	at := func() string { return time.Since(start).Round(time.Second).String() }
	runPod(t, podSpec{name: pod, containers: []container{{Name: "app", Image: busyboxImage,
		Command: []string{"sh", "-c", "readlink /proc/self/ns/pid; sleep " + crashSleep + "; exit 3"}}}})

	dead := waitContainer(t, pod, "app", "in back-off (exited after a restart)", func(s containerStatus) bool {
		return s.RestartCount >= 1 && (s.State.Terminated != nil || (s.State.Waiting != nil && s.State.Waiting.Reason == "CrashLoopBackOff"))
	})
	t.Logf("%s: app in back-off, %d restarts", at(), dead.RestartCount)
	inBackoff := debugCrashLooping(t, pod, "dbg-backoff")

	waitContainer(t, pod, "app", "running again", func(s containerStatus) bool {
		return s.State.Running != nil && s.RestartCount > dead.RestartCount
	})
	t.Logf("%s: app running again", at())
	joined := debugUntilTargetExits(t, pod, "dbg-running")
	t.Logf("%s: dbg-running died with app's instance", at())

	// The instance joined died; its pin stays with the debug container.
	t.Logf("%s: app's instance %.12s, joined by %s, has exited", at(), joined.rec.Target, joined.dbg.Name)
	if !pinned(t, joined.dbg.id()) {
		t.Errorf("%s's pins are gone while the container exists (its target %.12s has exited)", joined.dbg.Name, joined.rec.Target)
	}

	// The kubelet removes the containers of a deleted pod (its container
	// GC, every minute): each pin goes with its container.
	kubectl(t, "delete", "pod", pod, "--grace-period=1", "--wait", "--timeout=50s")
	deleted := time.Now()
	t.Logf("%s: pod deleted", at())
	for _, d := range []*crashDebug{inBackoff, joined} {
		var gone time.Time
		for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(250 * time.Millisecond) {
			if gone.IsZero() && !inContainerd(t, d.dbg.id()) {
				gone = time.Now()
			}
			if !gone.IsZero() && !pinned(t, d.dbg.id()) {
				t.Logf("%s removed by the kubelet %s after the pod was deleted; no pin left", d.dbg.Name, gone.Sub(deleted).Round(time.Second))
				break
			}
			if !gone.IsZero() && time.Since(gone) > 2*time.Second {
				t.Errorf("%s was removed from containerd, but its pins are still there 2 s later: %s", d.dbg.Name, pins(t))
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("the kubelet did not remove %s within 90 s of the pod's deletion", d.dbg.Name)
				break
			}
		}
	}
}

// crashDebug is a debug container of the crash-looping pod and what the
// shim recorded for it.
type crashDebug struct {
	dbg containerStatus
	rec oci.Record
}

// debugCrashLooping runs kubectl debug --target=app and checks that the
// debug container either joined app's instance named by TARGET, alive, or
// fell back because that instance is not running.
func debugCrashLooping(t *testing.T, pod, name string) *crashDebug {
	t.Helper()
	dbg, out := debug(t, pod, name, busyboxImage, "--target=app")
	ci := direct.Info(t, dbg.id())
	rec := ci.Record(t)
	r := rec.Namespaces["pid"]
	if got := direct.Info(t, rec.Target).Config.GetMetadata().GetName(); got != "app" {
		t.Errorf("%s's TARGET %.12s is containerd's %q, not an instance of app", name, rec.Target, got)
	}
	if got := ci.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(); got != runtimeapi.NamespaceMode_POD {
		t.Errorf("containerd received pid mode %v for %s, want POD: the shim must decide", got, name)
	}
	ns := firstLine(out)
	switch r.Result {
	case oci.Targeted:
		if want := "pid:[" + strconv.FormatUint(r.Inode, 10) + "]"; ns != want {
			t.Errorf("%s is in PID namespace %s; the record says it joined %s", name, ns, want)
		}
		if appNS := instanceNS(t, pod, rec.Target); ns != appNS {
			t.Errorf("%s is in PID namespace %s; the instance %.12s it joined printed %s", name, ns, rec.Target, appNS)
		}
		checkShimPinned(t, ci, dbg)
		checkVia(t, name, rec)
		t.Logf("%s joined app's live instance %.12s (%s) via %s", name, rec.Target, ns, rec.Via)
	case oci.Fallback:
		if r.ReasonKind != "target_not_running" {
			t.Errorf("%s fell back with %s (%s); want target_not_running", name, r.ReasonKind, r.Reason)
		}
		if pinned(t, dbg.id()) {
			t.Errorf("%s fell back, yet the shim holds pins for it", name)
		}
		t.Logf("%s fell back: app's instance %.12s is not running (%s)", name, rec.Target, r.Reason)
	default:
		t.Errorf("%s: record %+v; want targeted or a fallback", name, rec)
	}
	return &crashDebug{dbg: dbg, rec: rec}
}

// instanceNS is the PID namespace that app's instance id printed: its
// current instance's log, or its previous one's.
func instanceNS(t *testing.T, pod, id string) string {
	t.Helper()
	app, _ := getPod(t, pod).container("app")
	switch id {
	case app.id():
		return firstLine(logs(t, pod, "app"))
	case app.lastID():
		return firstLine(kubectl(t, "logs", pod, "-c", "app", "--previous"))
	}
	t.Fatalf("%.12s is neither app's current instance (%.12s) nor its previous one (%.12s)", id, app.id(), app.lastID())
	return ""
}

// debugUntilTargetExits runs kubectl debug --target=app with a debugger
// that prints its PID namespace and sleeps, while app's instance runs:
// it must join that instance's namespace (verified after its start), and
// die with it when it exits: the kubelet shows 137, and the shim's Warning
// TargetExited on the pod says why.
func debugUntilTargetExits(t *testing.T, pod, name string) *crashDebug {
	t.Helper()
	kubectl(t, "debug", pod, "--image="+busyboxImage, "--container="+name, "--target=app", "--",
		"sh", "-c", "readlink /proc/self/ns/pid; exec sleep 600")
	dbg := waitContainer(t, pod, name, "running", func(s containerStatus) bool { return s.State.Running != nil || s.State.Terminated != nil })
	rec := direct.Info(t, dbg.id()).Record(t)
	if r := rec.Namespaces["pid"]; r.Result != oci.Targeted {
		t.Fatalf("%s fell back (%s: %s): app's instance %.12s ended before it was made, and this test needs it joined", name, r.ReasonKind, r.Reason, rec.Target)
	}
	v := verified(t, dbg.id(), "pid")
	appNS := instanceNS(t, pod, rec.Target)
	if v.Result != oci.Joined || "pid:["+strconv.FormatUint(v.Inode, 10)+"]" != appNS {
		t.Errorf("%s's check after its start = %+v, want joined in app's instance's %s", name, v, appNS)
	}
	dbg = waitContainer(t, pod, name, "terminated, with app's instance", terminated)
	if code := dbg.State.Terminated.ExitCode; code != 137 {
		t.Errorf("%s exited %d; want 137, killed with app's instance", name, code)
	}
	if ns := firstLine(logs(t, pod, name)); ns != appNS {
		t.Errorf("%s printed %s; app's instance %s", name, ns, appNS)
	}
	e := shimEventWith(t, pod, name, "TargetExited")
	want := "Target container app exited (exit code 3), and the kernel killed container " + name + " with it: " + name + " ran in app's pid namespace, " +
		"and when a PID namespace's init (here app's process) exits, every other process in it is killed. That is why " + name + " ended with exit code 137."
	if e.Type != "Warning" || e.Message != want {
		t.Errorf("event %s %s %q\nwant Warning TargetExited %q", e.Type, e.Reason, e.Message, want)
	}
	operatorSees(t, pod, e)
	if te := direct.Info(t, dbg.id()).Record(t).TargetExited; te == nil || te.ExitCode != 3 {
		t.Errorf("%s's record says targetExited %+v, want app's exit code 3", name, te)
	}
	return &crashDebug{dbg: dbg, rec: rec}
}

// inContainerd reports whether containerd itself (not through the shim)
// still has the container.
func inContainerd(t *testing.T, id string) bool {
	t.Helper()
	_, err := direct.Runtime.ContainerStatus(ctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if status.Code(err) == codes.NotFound || (err != nil && strings.Contains(err.Error(), "not found")) {
		return false
	}
	if err != nil {
		t.Fatalf("containerd ContainerStatus %s: %v", id, err)
	}
	return true
}
