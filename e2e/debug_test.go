//go:build e2e

package e2e

import (
	"bytes"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/critesting"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// checkTargeted asserts that the debug container ran in the app's PID
// namespace and saw its processes (from what it printed), and that the shim
// did it: containerd received POD, and the spec points at the shim's pin.
func checkTargeted(t *testing.T, app, dbg containerStatus, appNS, out string) {
	t.Helper()
	if ns := firstLine(out); ns != appNS {
		t.Errorf("%s's PID namespace is %q, app's %q", dbg.Name, ns, appNS)
	}
	if !strings.Contains(out, "sleep "+appSleep) {
		t.Errorf("%s does not see app's process (sleep %s):\n%s", dbg.Name, appSleep, out)
	}
	ci := direct.Info(t, dbg.id())
	path := checkShimPinned(t, ci, dbg)
	rec := ci.Record(t)
	if r := rec.Namespaces["pid"]; rec.Target != app.id() || r.Result != oci.Targeted || "pid:["+strconv.FormatUint(r.Inode, 10)+"]" != appNS {
		t.Errorf("%s's record = %+v, want targeted at %s (%s)", dbg.Name, rec, app.id(), appNS)
	}
	checkVia(t, dbg.Name, rec)
	// what the shim saw once it ran: its init process in app's namespace
	if v := verified(t, dbg.id(), "pid"); v.Result != oci.Joined || "pid:["+strconv.FormatUint(v.Inode, 10)+"]" != appNS {
		t.Errorf("%s's check after its start = %+v, want joined in %s", dbg.Name, v, appNS)
	}
	if !t.Failed() {
		t.Logf("%s: in app's %s, via %s, verified after start; containerd received POD, spec → %s", dbg.Name, appNS, rec.Via, path)
	}
}

// verified waits (10 s) for the shim's check after the start of container
// id to be in its record, for namespace kind, and returns it.
func verified(t *testing.T, id, kind string) oci.Verification {
	t.Helper()
	return verifiedIn(t, shim.LogPath(), id, kind)
}

// verifiedIn is verified for the cri-nstarget that logs to log.
func verifiedIn(t *testing.T, log, id, kind string) oci.Verification {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if v := direct.Info(t, id).Record(t).Namespaces[kind].Verify; v != nil {
			return *v
		}
		if time.Now().After(deadline) {
			t.Fatalf("no check after the start of %.12s in its record within 10 s\ncri-nstarget log tail:\n%s", id, tail(log, 3000))
		}
	}
}

// checkShimPinned checks that the shim, not containerd, targeted dbg:
// containerd received POD, and the spec's pid namespace path is the shim's
// pin. It returns that path.
func checkShimPinned(t *testing.T, ci critesting.ContainerInfo, dbg containerStatus) string {
	t.Helper()
	if got := ci.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(); got != runtimeapi.NamespaceMode_POD {
		t.Errorf("containerd received pid mode %v for %s, want POD: the shim must do the targeting", got, dbg.Name)
	}
	path, _ := oci.NamespacePath(ci.RuntimeSpec, specs.PIDNamespace)
	if pin := shim.StateDir() + "/pins/" + dbg.id() + "/pid"; path != pin {
		t.Errorf("%s's spec pid namespace path = %q, want the shim's pin %q", dbg.Name, path, pin)
	}
	return path
}

// startApp runs a pod whose container "app" prints its PID namespace and
// sleeps, and returns app's status and namespace.
func startApp(t *testing.T, p podSpec) (containerStatus, string) {
	t.Helper()
	p.containers = append([]container{{Name: "app", Image: busyboxImage, Command: appCmd()}}, p.containers...)
	runPod(t, p)
	waitReady(t, p.name)
	app, _ := getPod(t, p.name).container("app")
	ns := firstLine(logs(t, p.name, "app"))
	if !strings.HasPrefix(ns, "pid:[") {
		t.Fatalf("app printed %q, not its PID namespace", ns)
	}
	return app, ns
}

// kubectl debug --target=app, with each kubectl profile; and a control
// without --target, which gets a PID namespace of its own.
func TestDebugTarget(t *testing.T) {
	alongside(t)
	app, appNS := startApp(t, podSpec{name: "target"})
	for _, tc := range []struct{ name, image, profile string }{
		{"dbg-default", busyboxImage, ""},
		{"dbg-general", busyboxImage, "general"},
		{"dbg-restricted", nobodyImage, "restricted"}, // runAsNonRoot: an image that runs as 65534
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"--target=app"}
			if tc.profile != "" {
				args = append(args, "--profile="+tc.profile)
			}
			dbg, out := debug(t, "target", tc.name, tc.image, args...)
			checkTargeted(t, app, dbg, appNS, out)
			// the operator is told what was seen, where kubectl shows it
			e := shimEvent(t, "target", tc.name)
			if want := "Container " + tc.name + " joined the pid namespace of target container app, verified after it started: its init process is in " + appNS +
				" (`readlink /proc/self/ns/pid` prints it inside it), pinned by cri-nstarget; it sees app's processes."; e.Type != "Normal" || e.Reason != "Targeted" || e.Message != want {
				t.Errorf("event %s %s %q; want Normal Targeted %q", e.Type, e.Reason, e.Message, want)
			}
			if tc.name == "dbg-default" {
				operatorSees(t, "target", e)
			}
		})
	}
	// As an operator runs it: attached, the output streamed back through
	// the apiserver, the kubelet and the runtime's Attach (forwarded by
	// the shim to containerd's streaming server).
	t.Run("attached", func(t *testing.T) {
		cmd := []string{"debug", "target", "-i", "--image=" + busyboxImage, "--container=dbg-attached", "--target=app", "--",
			"sh", "-c", "sleep 1; readlink /proc/self/ns/pid; ps -o pid,args; sleep 1"}
		// stdin stays open (as a terminal's would) until kubectl exits: the
		// session ends when the container does. The last sleep lets the
		// stream deliver what was written before the container exits (once,
		// at ead4de3, ps's output written just before the exit never
		// reached kubectl; the stream goes from containerd's streaming
		// server to the kubelet, not through the shim).
		k := kube.KubectlCommand(ctx(t), cmd...)
		stdin, err := k.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		defer stdin.Close()
		var stdout, stderr bytes.Buffer
		k.Stdout, k.Stderr = &stdout, &stderr
		if err := k.Run(); err != nil {
			t.Fatalf("kubectl %s: %v: %s", strings.Join(cmd, " "), err, stderr.String())
		}
		if out := stdout.String(); !strings.Contains(out, appNS) || !strings.Contains(out, "sleep "+appSleep) {
			t.Errorf("kubectl debug -i printed %q (stderr %q); want app's namespace %s and its process", out, stderr.String(), appNS)
		}
		dbg := waitContainer(t, "target", "dbg-attached", "terminated", terminated)
		checkTargeted(t, app, dbg, appNS, logs(t, "target", "dbg-attached"))
	})
	t.Run("control-without-target", func(t *testing.T) {
		_, out := debug(t, "target", "dbg-control", busyboxImage)
		if ns := firstLine(out); ns == appNS || !strings.HasPrefix(ns, "pid:[") {
			t.Errorf("without --target the debug container's PID namespace is %q; want one of its own, not app's %q", ns, appNS)
		}
		if strings.Contains(out, "sleep "+appSleep) {
			t.Errorf("without --target the debug container sees app's process:\n%s", out)
		}
	})
}

// From 1.36 `kubectl debug` without --profile uses the general profile,
// which adds SYS_PTRACE to an ephemeral container (the legacy profile, the
// default before, adds nothing). What kubelet 1.37 sends for it: containerd
// received SYS_PTRACE among the added capabilities and runs the container
// with CAP_SYS_PTRACE, and the shim targeted it as any other.
func TestDebugDefaultProfile(t *testing.T) {
	alongside(t)
	requireMinor(t, "kubectl", kubectlVersion(t), 36, "kubectl debug's default profile is legacy before 1.36 and adds no capability")
	app, appNS := startApp(t, podSpec{name: "profile"})
	dbg, out := debug(t, "profile", "dbg-no-profile", busyboxImage, "--target=app")
	checkTargeted(t, app, dbg, appNS, out)
	ci := direct.Info(t, dbg.id())
	added := ci.Config.GetLinux().GetSecurityContext().GetCapabilities().GetAddCapabilities()
	if !slices.Contains(added, "SYS_PTRACE") {
		t.Errorf("containerd received added capabilities %q for %s; want SYS_PTRACE (kubectl's general profile)", added, dbg.Name)
	}
	var eff []string
	if p := ci.RuntimeSpec.Process; p != nil && p.Capabilities != nil {
		eff = p.Capabilities.Effective
	}
	if !slices.Contains(eff, "CAP_SYS_PTRACE") {
		t.Errorf("%s runs with effective capabilities %q; want CAP_SYS_PTRACE", dbg.Name, eff)
	}
	t.Logf("kubectl %s, kubelet %s: %s created with added capabilities %q", kubectlVersion(t), kubeletVersion(t), dbg.Name, added)
}

// A target that has exited before the debug container starts: the kubelet
// still sends TARGET with its id; the shim falls back to the pod's namespace
// and its annotation says why. The pod stays up through a second container.
func TestDebugExitedTarget(t *testing.T) {
	alongside(t)
	runExitedTargetPod(t, "exited")
	dbg, out := debug(t, "exited", "dbg-fallback", busyboxImage, "--target=app")
	if !strings.HasPrefix(firstLine(out), "pid:[") {
		t.Errorf("debug container printed %q", out)
	}
	rec := direct.Info(t, dbg.id()).Record(t)
	r := rec.Namespaces["pid"]
	if r.Result != oci.Fallback || r.ReasonKind != "target_not_running" || !strings.Contains(r.Reason, "not running") {
		t.Errorf("record = %+v, want a fallback whose reason says the target is not running", rec)
	}
	t.Logf("kubelet reports %s terminated (exit %d); annotation: %s, %s (%s)", dbg.Name, dbg.State.Terminated.ExitCode, r.Result, r.ReasonKind, r.Reason)
	// kubectl shows why: a Warning on the pod, about the debug container
	e := shimEvent(t, "exited", "dbg-fallback")
	if want := "Container dbg-fallback runs in the pod's pid namespace, not in target container app's: app is not running (target_not_running). " +
		"It sees the pod's processes, not app's."; e.Type != "Warning" || e.Reason != "TargetingFallback" || e.Message != want {
		t.Errorf("event %s %s %q; want Warning TargetingFallback %q", e.Type, e.Reason, e.Message, want)
	}
	operatorSees(t, "exited", e)
}

// runExitedTargetPod runs a pod whose "app" exits at once and whose
// "keeper" keeps it running, and waits until app has exited.
func runExitedTargetPod(t *testing.T, name string) {
	t.Helper()
	runPod(t, podSpec{name: name, restartPolicy: "Never", containers: []container{
		{Name: "app", Image: busyboxImage, Command: []string{"true"}},
		{Name: "keeper", Image: busyboxImage, Command: []string{"sleep", appSleep}},
	}})
	waitContainer(t, name, "app", "terminated", terminated)
	waitContainer(t, name, "keeper", "running", func(s containerStatus) bool { return s.State.Running != nil })
}

// In strict mode the same debug container is refused: the kubelet shows the
// shim's error, and containerd holds no container of that name.
func TestDebugExitedTargetStrict(t *testing.T) {
	restartShim(t, "--strict-targeting")
	t.Cleanup(func() { restartShim(t) })
	runExitedTargetPod(t, "strict")
	before := pins(t)
	kubectl(t, "debug", "strict", "--image="+busyboxImage, "--container=dbg-strict", "--target=app", "--", "true")
	st := waitContainer(t, "strict", "dbg-strict", "refused", func(s containerStatus) bool {
		return s.State.Waiting != nil && s.State.Waiting.Message != ""
	})
	refusal := "strict targeting: container dbg-strict cannot join the pid namespace of target container app: app is not running (target_not_running: "
	if w := st.State.Waiting; w.Reason != "CreateContainerError" || !strings.Contains(w.Message, refusal) {
		t.Errorf("kubelet shows %s: %q; want CreateContainerError with the shim's refusal %q...", w.Reason, w.Message, refusal)
	}
	// The kubelet posts the refusal as its own Failed event; the shim
	// posts none.
	var failed []kubeEvent
	for deadline := time.Now().Add(30 * time.Second); len(failed) == 0 && time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		failed = eventsOf(podEvents(t, "strict"), "dbg-strict", "kubelet")
		failed = slices.DeleteFunc(failed, func(e kubeEvent) bool { return e.Reason != "Failed" || !strings.Contains(e.Message, refusal) })
	}
	if len(failed) == 0 {
		t.Errorf("no kubelet Failed event with the refusal; events: %+v", podEvents(t, "strict"))
	} else {
		operatorSees(t, "strict", failed[0])
	}
	if evs := eventsOf(podEvents(t, "strict"), "dbg-strict", "cri-nstarget"); len(evs) > 0 {
		t.Errorf("cri-nstarget posted events for a refused container: %+v", evs)
	}
	if left := containersNamed(t, getPod(t, "strict").Metadata.UID, "dbg-strict"); len(left) > 0 {
		t.Errorf("containerd holds refused containers: %v", left)
	}
	// The kubelet retries a failed ephemeral create, and a retry in the
	// shim may hold a pin for a moment: the set must come back to what it
	// was, and stay so.
	var after string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if after = pins(t); after == before || time.Now().After(deadline) {
			break
		}
	}
	if after != before {
		t.Errorf("pins after the refusal: [%s]; before it: [%s]", after, before)
	}
	t.Logf("kubelet shows %s: %s", st.State.Waiting.Reason, st.State.Waiting.Message)
}

// pins lists the shim's pin directories (one per targeted container).
func pins(t *testing.T) string {
	t.Helper()
	es, err := os.ReadDir(shim.StateDir() + "/pins")
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return strings.Join(names, " ")
}

// pinned reports whether the shim holds pins for the container id.
func pinned(t *testing.T, id string) bool {
	t.Helper()
	_, err := os.Stat(shim.StateDir() + "/pins/" + id)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return err == nil
}

// restartShim stops the shim with SIGTERM and starts it again with the
// suite's flags plus extra.
func restartShim(t *testing.T, extra ...string) {
	t.Helper()
	if err := shim.Stop(); err != nil {
		t.Fatalf("stop cri-nstarget: %v", err)
	}
	shim.Args = append(shim.Args[:baseArgs:baseArgs], extra...)
	if err := shim.Start(ctx(t)); err != nil {
		t.Fatalf("start cri-nstarget: %v", err)
	}
}

// The shim restarted while the kubelet runs: the pod stays Ready with the
// same container, and a new debug container is targeted.
func TestShimRestart(t *testing.T) {
	app, appNS := startApp(t, podSpec{name: "restart"})
	restartShim(t)
	// The kubelet relists every second; let it see the new shim a few times.
	for deadline := time.Now().Add(6 * time.Second); time.Now().Before(deadline); time.Sleep(time.Second) {
		p := getPod(t, "restart")
		now, _ := p.container("app")
		if !p.ready() || now.ContainerID != app.ContainerID || now.RestartCount != 0 {
			t.Fatalf("after the restart: pod ready=%v, app %s restarts %d; before: %s", p.ready(), now.ContainerID, now.RestartCount, app.ContainerID)
		}
	}
	if ready, err := kube.NodeReady(ctx(t)); err != nil || !ready {
		t.Errorf("node Ready = %v (%v) after the shim restarted", ready, err)
	}
	dbg, out := debug(t, "restart", "dbg-after-restart", busyboxImage, "--target=app")
	checkTargeted(t, app, dbg, appNS, out)
}

// kubectl debug --target on a pod with hostUsers: false, where the backend
// supports user namespaces (NSTARGET_REQUIRE_USERNS=1 makes it required).
func TestDebugTargetUserNamespaced(t *testing.T) {
	alongside(t)
	if os.Getenv("NSTARGET_REQUIRE_USERNS") != "1" {
		t.Skip("skipping: user-namespaced pods need containerd 2.x with a runc that supports them (the containerd 2.4, 2.3 and 2.0 legs set NSTARGET_REQUIRE_USERNS=1)")
	}
	no := false
	app, appNS := startApp(t, podSpec{name: "userns", hostUsers: &no})
	self, err := os.Readlink("/proc/self/ns/user")
	if err != nil {
		t.Fatal(err)
	}
	if spec := direct.Info(t, app.id()).RuntimeSpec; spec.Linux == nil || len(spec.Linux.UIDMappings) == 0 {
		t.Fatalf("app of a hostUsers: false pod has no uid mappings in its spec (host user namespace %s)", self)
	}
	appUser := userLine(logs(t, "userns", "app"))
	if appUser == "" || strings.HasPrefix(appUser, self+" ") {
		t.Fatalf("app of a hostUsers: false pod printed user namespace %q; the host's is %s", appUser, self)
	}
	dbg, out := debug(t, "userns", "dbg-userns", busyboxImage, "--target=app")
	checkTargeted(t, app, dbg, appNS, out)
	// The debugger joins app's PID namespace from the pod's user namespace,
	// never from the host's: same user namespace and uid map as app.
	if got := userLine(out); got != appUser {
		t.Errorf("%s's user namespace and uid map are %q; want app's %q (the host's namespace is %s)", dbg.Name, got, appUser, self)
	}
	t.Logf("%s and app: %s", dbg.Name, appUser)
}
