//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// The plugin mode (mode = "plugin"): cri-nstarget serves no CRI socket, and
// every call below goes to containerd's own CRI socket (direct), as the
// kubelet's would; cri-nstarget only answers containerd's NRI events.

// startPlugin starts binary in the plugin mode beside the test containerd,
// stopped (by pid) when t ends; its pins must all be released by then
// (containerd's RemoveContainer events, as the test's pods are removed).
func startPlugin(t *testing.T, binary string, flags ...string) *harness.Shim {
	t.Helper()
	return startPluginWrapped(t, nil, binary, flags...)
}

// ownMountNS runs the plugin in a mount namespace of its own, private, as
// in its pod (deploy/plugin): its pins are not seen on the host.
var ownMountNS = []string{"unshare", "--mount", "--propagation", "private", "--"}

// startPluginWrapped is startPlugin with the plugin run by wrap (nil:
// none; ownMountNS).
func startPluginWrapped(t *testing.T, wrap []string, binary string, flags ...string) *harness.Shim {
	t.Helper()
	requireNRI(t)
	dir := filepath.Join(tmp, fmt.Sprintf("s%d", shimCount.Add(1)))
	s, err := harness.StartPluginWrapped(context.Background(), wrap, binary, dir, env.Containerd, flags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// runs after the cleanups of the pods made while it ran; in the
		// plugin's own mount namespace, where its pins are
		eventually(t, "the plugin's pins to be released", func() bool {
			m, err := harness.MountsUnderOf(s.PID(), s.StateDir())
			return err == nil && len(m) == 0
		})
		if err := s.Close(); err != nil {
			t.Errorf("stop the plugin: %v", err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(s.LogPath())
			t.Logf("plugin log:\n%s", b)
		}
	})
	return s
}

// pinOf is where the plugin mode pins container id's PID namespace, in its
// own mount namespace.
func pinOf(s *harness.Shim, id string) string { return filepath.Join(s.StateDir(), "pins", id, "pid") }

// pinNameOf is that pin as NRI's answer names it to runc on the host:
// through the plugin's root, /proc/<its pid>/root/...
func pinNameOf(s *harness.Shim, id string) string {
	return fmt.Sprintf("/proc/%d/root%s", s.PID(), pinOf(s, id))
}

// A TARGET debug container made by containerd's own CRI is pinned by the
// plugin inside containerd's create: its spec names the pin, never the
// target's /proc/<pid>/ns/pid that containerd wrote; it sees the target's
// processes; its record says the plugin mode wrote it through NRI; and the
// check after its start (at NRI's PostStartContainer) sees it joined.
func TestPluginModeTarget(t *testing.T) {
	s := startPlugin(t, shimBin)
	p := runPod(t, direct, ownMode)
	app := run(t, direct, p, "app", pidOwn, "sleep", "3651")
	dbg := mustCreate(t, direct, p, "debug", targetOf(app))
	ci := direct.Info(t, dbg)
	rec := ci.Record(t)
	if got := nsPath(ci, "pid"); got != pinNameOf(s, dbg) {
		t.Errorf("debug container's spec names pid namespace %q, want the plugin's pin %s (containerd wrote /proc/%d/ns/pid)", got, pinNameOf(s, dbg), pidOf(t, app))
	}
	if ns := rec.Namespaces["pid"]; rec.Mode != "plugin" || rec.Via != "nri" || rec.Target != app || ns.Result != oci.Targeted ||
		ns.PodPath != fmt.Sprintf("/proc/%d/ns/pid", pidOf(t, app)) {
		t.Errorf("record %+v: want targeted at %s by the plugin mode, through NRI, containerd's path kept as the pod's", rec, app)
	}
	mustStart(t, direct, dbg)
	if ps := execIn(t, direct, dbg, "ps", "-o", "pid,args"); !strings.Contains(ps, "sleep 3651") {
		t.Errorf("debug container does not see the app's process:\n%s", ps)
	}
	if got, want := nsInside(t, direct, dbg, "pid"), nsInside(t, direct, app, "pid"); got != want {
		t.Errorf("debug container in pid namespace %s, want the app's %s", got, want)
	}
	eventually(t, "the check after the start to see it joined", func() bool {
		v := direct.Info(t, dbg).Record(t).Namespaces["pid"].Verify
		return v != nil && v.Result == oci.Joined
	})
	if !toldByProc(s, app) {
		t.Errorf("the plugin's log has no line saying /proc told the target's pid (%q), target %s: containerd was asked instead", procToldLog, app)
	}
}

// procToldLog is what the plugin logs (debug) when /proc, not containerd,
// told it that the pid containerd wrote is the target's init
// (server.localConfirmedLog).
const procToldLog = "the target's pid told by /proc, not asked of containerd"

// toldByProc tells whether plugin s logged that /proc confirmed target's
// pid as its init (refused nothing).
func toldByProc(s *harness.Shim, target string) bool {
	b, _ := os.ReadFile(s.LogPath())
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, procToldLog) && strings.Contains(line, "target="+target) && strings.Contains(line, "refused=\"<nil>\"") {
			return true
		}
	}
	return false
}

// The target is killed after the debug container's create and an unrelated
// process takes its pid before the start: the namespace the debug
// container's spec names is still the target's (the pin), never the
// impostor's, which containerd's /proc/<pid>/ns/pid would name now. Its
// start then never lands in the impostor's namespace (containerd's own
// check at start refuses a target that is not running; if it did not, runc
// would join the pin).
func TestPluginModePIDReuseBetweenCreateAndStart(t *testing.T) {
	s := startPlugin(t, shimBin)
	p := runPod(t, direct, ownMode)
	app := run(t, direct, p, "app", pidOwn)
	pid := pidOf(t, app)
	appNS, err := namespaces.Stat(fmt.Sprintf("/proc/%d/ns/pid", pid))
	if err != nil {
		t.Fatal(err)
	}
	dbg := mustCreate(t, direct, p, "debug", targetOf(app))
	if !toldByProc(s, app) {
		t.Errorf("the plugin's log has no line saying /proc told the target's pid (%q): containerd's word was asked instead", procToldLog)
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	eventually(t, "pid to be free", func() bool { return syscall.Kill(pid, 0) == syscall.ESRCH })
	impostor := reoccupy(t, pid)
	impostorNS, err := namespaces.Stat(fmt.Sprintf("/proc/%d/ns/pid", impostor.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	path := nsPath(direct.Info(t, dbg), "pid")
	if path != pinNameOf(s, dbg) {
		t.Errorf("the debug container's spec names %s, want the plugin's pin %s", path, pinNameOf(s, dbg))
	}
	named, err := namespaces.Stat(path)
	switch {
	case err != nil:
		t.Fatalf("the namespace the debug container's spec names (%s): %v", path, err)
	case named == impostorNS:
		t.Fatalf("the debug container's spec names %s, the impostor's pid namespace %v (pid %d reused)", path, impostorNS, pid)
	case named != appNS:
		t.Errorf("the debug container's spec names %s, namespace %v; want the target's %v", path, named, appNS)
	}
	_, err = direct.Runtime.StartContainer(ctx(t), &runtimeapi.StartContainerRequest{ContainerId: dbg})
	t.Logf("start after the target's pid was reused: %v", err)
	if err == nil && nsInside(t, direct, dbg, "pid") == nsOfPid(t, impostor.Process.Pid, "pid") {
		t.Fatal("the debug container started in the impostor's pid namespace")
	}
}

// containerd checks that a TARGET is a running container of the same pod
// before it makes anything, and before NRI: a debug container targeting
// another pod's container is refused by containerd itself, and the plugin
// never sees it (nothing pinned). The plugin's own check of the pid
// containerd wrote (the running container of the same pod with that pid)
// is for a pid reused in between; TestPluginModeCreate and TestProcsFind
// (server) hold it.
func TestPluginModeSamePod(t *testing.T) {
	s := startPlugin(t, shimBin)
	other := runPod(t, direct, ownMode)
	app := run(t, direct, other, "app", pidOwn)
	p := runPod(t, direct, ownMode)
	if _, err := createIn(t, direct, p, "debug", targetOf(app)); err == nil || !strings.Contains(err.Error(), "does not belong to sandbox") {
		t.Errorf("create targeting another pod's container: %v, want containerd's refusal", err)
	}
	if m := mountsUnder(t, filepath.Join(s.StateDir(), "pins")); len(m) != 0 {
		t.Errorf("pins after a refused create: %v", m)
	}
}

// The plugin killed while containerd waits for its answer to a TARGET
// create, then restarted: containerd gives up on it and makes the
// container as it would without it (its own /proc/<pid>/ns/pid, unpinned;
// its client has it), or fails the create; either way nothing is left that
// blocks the next try: no intent record, no pin of a container containerd
// does not have, and the next debug container of the same pod is pinned.
func TestPluginModeKilledMidCreate(t *testing.T) {
	marks := t.TempDir()
	t.Setenv("CRI_NSTARGET_FAILPOINT", "create:nri-event")
	t.Setenv("CRI_NSTARGET_FAILPOINT_DIR", marks)
	s := startPlugin(t, failpointShim(t))
	p := runPod(t, direct, ownMode)
	app := run(t, direct, p, "app", pidOwn)
	answered := make(chan error, 1)
	var first string
	go func() {
		var err error
		first, err = createIn(t, direct, p, "debug", targetOf(app))
		answered <- err
	}()
	eventually(t, "the plugin to stop in its answer", func() bool { _, err := os.Stat(filepath.Join(marks, "failpoint-reached")); return err == nil })
	s.Kill()
	var err error
	select {
	case err = <-answered:
	case <-time.After(time.Minute):
		t.Fatal("containerd's create did not end within a minute of the plugin's death")
	}
	t.Logf("containerd's create, its plugin killed in its answer: id %q, %v", first, err)
	t.Setenv("CRI_NSTARGET_FAILPOINT", "")
	if err := s.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	attempt := uint32(0)
	if err == nil {
		if path := nsPath(direct.Info(t, first), "pid"); path != fmt.Sprintf("/proc/%d/ns/pid", pidOf(t, app)) {
			t.Errorf("the container made without the plugin's answer names pid namespace %q, want containerd's own", path)
		}
		attempt = 1
	}
	eventually(t, "the intent record to be reconciled", func() bool {
		recs, _ := os.ReadDir(filepath.Join(s.StateDir(), "intents"))
		return len(recs) == 0
	})
	if err == nil && !containerIDs(t)[first] {
		t.Errorf("the container containerd made without the plugin's answer (%s) was removed at the restart: its client holds it", first)
	}
	dbg, err := createCfg(t, direct, p, &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "debug", Attempt: attempt},
		Command: []string{"sleep", "3600"}, Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: targetOf(app)}}})
	if err != nil {
		t.Fatalf("the next try after the plugin's restart: %v", err)
	}
	if got := nsPath(direct.Info(t, dbg), "pid"); got != pinNameOf(s, dbg) {
		t.Errorf("the next try names pid namespace %q, want the pin %s", got, pinNameOf(s, dbg))
	}
	mustStart(t, direct, dbg)
	if got, want := nsInside(t, direct, dbg, "pid"), nsInside(t, direct, app, "pid"); got != want {
		t.Errorf("the next try runs in pid namespace %s, want the app's %s", got, want)
	}
	if pins, _ := os.ReadDir(filepath.Join(s.StateDir(), "pins")); len(pins) != 1 || pins[0].Name() != dbg {
		t.Errorf("pin directories: %v, want only %s", names(pins), dbg)
	}
}

// The plugin in a mount namespace of its own (as in its pod, where nothing
// it mounts reaches the host): its pin is not at its path on the host, and
// NRI's answer names it through the plugin's root, /proc/<its pid>/root/...,
// which runc on the host opens through the plugin's mount namespace: the
// debug container joins its target.
func TestPluginModeOwnMountNamespace(t *testing.T) {
	s := startPluginWrapped(t, ownMountNS, shimBin)
	p := runPod(t, direct, ownMode)
	app := run(t, direct, p, "app", pidOwn)
	appNS, err := namespaces.Stat(fmt.Sprintf("/proc/%d/ns/pid", pidOf(t, app)))
	if err != nil {
		t.Fatal(err)
	}
	dbg := mustCreate(t, direct, p, "debug", targetOf(app))
	if onHost, err := namespaces.Stat(pinOf(s, dbg)); err == nil && onHost == appNS {
		t.Fatalf("the pin %s is the target's namespace on the host too: the plugin's mount namespace is not its own", pinOf(s, dbg))
	}
	if m := mountsUnder(t, s.StateDir()); len(m) != 0 {
		t.Errorf("mounts on the host under the plugin's state dir: %v, want none", m)
	}
	if got := nsPath(direct.Info(t, dbg), "pid"); got != pinNameOf(s, dbg) {
		t.Errorf("the debug container's spec names pid namespace %q, want the pin through the plugin's root, %s", got, pinNameOf(s, dbg))
	}
	mustStart(t, direct, dbg)
	if got, want := nsInside(t, direct, dbg, "pid"), nsInside(t, direct, app, "pid"); got != want {
		t.Errorf("debug container in pid namespace %s, want the app's %s", got, want)
	}
}

// The plugin, in a mount namespace of its own, killed between a TARGET
// container's create and its start: its pin went with its process, so the
// start fails (the path names nothing now; never another namespace). The
// restarted plugin finds the container created and not started, naming the
// pin of its predecessor: it says so (a Warning TargetPinLost on the pod;
// here, with no Events, its log), and leaves nothing that blocks the next
// try, which is pinned and joins.
func TestPluginModeKilledBeforeStart(t *testing.T) {
	s := startPluginWrapped(t, ownMountNS, shimBin)
	p := runPod(t, direct, ownMode)
	app := run(t, direct, p, "app", pidOwn)
	dbg := mustCreate(t, direct, p, "debug", targetOf(app))
	lost := pinNameOf(s, dbg)
	s.Kill()
	if err := s.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the restarted plugin to see the lost pin", func() bool {
		b, _ := os.ReadFile(s.LogPath())
		return strings.Contains(string(b), "names the pin of an earlier process of the plugin") && strings.Contains(string(b), dbg)
	})
	_, err := direct.Runtime.StartContainer(ctx(t), &runtimeapi.StartContainerRequest{ContainerId: dbg})
	t.Logf("start after the plugin's restart, its spec naming %s: %v", lost, err)
	if err == nil {
		t.Fatalf("the start of %s succeeded, its spec naming the pin of a dead plugin (%s), in pid namespace %s (the app's: %s)",
			dbg, lost, nsInside(t, direct, dbg, "pid"), nsInside(t, direct, app, "pid"))
	}
	if pins, _ := os.ReadDir(filepath.Join(s.StateDir(), "pins")); len(pins) != 0 {
		t.Errorf("pin directories after the restart: %v, want none", names(pins))
	}
	retry := run(t, direct, p, "debug2", targetOf(app))
	if got := nsPath(direct.Info(t, retry), "pid"); got != pinNameOf(s, retry) {
		t.Errorf("the next try names pid namespace %q, want the pin %s", got, pinNameOf(s, retry))
	}
	if got, want := nsInside(t, direct, retry, "pid"), nsInside(t, direct, app, "pid"); got != want {
		t.Errorf("the next try runs in pid namespace %s, want the app's %s", got, want)
	}
}

// A pod that shares its PID namespace (POD mode, shareProcessNamespace):
// containerd writes /proc/<sandbox pid>/ns/pid into each of its
// containers' specs, the same form as a TARGET's, and the plugin leaves
// them alone: no record, no fallback, and in strict mode no refusal.
func TestPluginModeSharedPodPID(t *testing.T) {
	startPlugin(t, shimBin, "--strict-targeting")
	p := runPod(t, direct, podMode)
	id, err := createIn(t, direct, p, "a", &runtimeapi.NamespaceOption{Pid: podMode}, "sleep", "3652")
	if err != nil {
		t.Fatalf("create in a pod sharing its PID namespace, the plugin strict: %v", err)
	}
	ci := direct.Info(t, id)
	if rec, ok := ci.RuntimeSpec.Annotations[oci.AnnotationTargeting]; ok {
		t.Errorf("a container of a pod sharing its PID namespace has a record: %s", rec)
	}
	if got := nsPath(ci, "pid"); !strings.HasPrefix(got, "/proc/") || !strings.HasSuffix(got, "/ns/pid") {
		t.Errorf("its spec names pid namespace %q, want containerd's /proc/<sandbox pid>/ns/pid", got)
	}
	mustStart(t, direct, id)
}

// The harness starts a plugin at log level warn (no line at info or debug
// to wait for) and knows when it is connected: by its /healthz. A TARGET
// create right after is pinned.
func TestPluginModeStartsAtLogLevelWarn(t *testing.T) {
	s := startPlugin(t, shimBin, "--log-level", "warn")
	p := runPod(t, direct, ownMode)
	app := run(t, direct, p, "app", pidOwn)
	dbg := mustCreate(t, direct, p, "debug", targetOf(app))
	if got := nsPath(direct.Info(t, dbg), "pid"); got != pinNameOf(s, dbg) {
		t.Errorf("debug container's pid namespace %q, want the plugin's pin %s", got, pinNameOf(s, dbg))
	}
}
