//go:build integration

package integration

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// The plugin mode in a pod of the stand-in for a sandboxed runtime
// (nojoinHandler, as TestSandboxedRuntimeNotJoined has it for the proxy),
// everything through containerd's own CRI socket: the debug container's
// spec is pointed at the plugin's pin, it starts in a PID namespace of its
// own, and the check after its start (at NRI's PostStartContainer) says
// so: its record not_joined, the targeting metric (mode plugin, stage
// verify), and the Warning TargetNotJoined on its pod with the proxy's
// text (TestDebugSandboxedRuntime, e2e). The handler is learnt (the state
// dir's table): the next TARGET create in its pods is left as containerd
// made it, a fallback runtime_cannot_join, nothing pinned.
func TestPluginModeNotJoined(t *testing.T) {
	api := newEventsAPI(t)
	s := startPlugin(t, shimBin, "--metrics-address", "127.0.0.1:0", "--events-kubeconfig", api.kubeconfig(t, t.TempDir()))
	p := runPodOn(t, direct, nojoinHandler, hostNetOwn)
	api.addPod(p)
	app := run(t, direct, p, "app", pidOwn, "sleep", "3652")
	appNS := nsOfPid(t, pidOf(t, app), "pid")
	dbg := mustCreate(t, direct, p, "debug", targetOf(app))
	rec := direct.Info(t, dbg).Record(t)
	if path, own := nsPath(direct.Info(t, dbg), "pid"), fmt.Sprintf("/proc/%d/ns/pid", pidOf(t, app)); rec.Mode != "plugin" ||
		rec.Namespaces["pid"].Result != oci.Targeted || path != rec.Namespaces["pid"].Path || path == own {
		t.Fatalf("record %+v, spec pid path %q: want targeted by the plugin mode, the spec pointed at its pin, not at containerd's %s", rec, path, own)
	}
	mustStart(t, direct, dbg)
	seen := nsInside(t, direct, dbg, "pid")
	if seen == appNS {
		t.Fatalf("the debug container is in the app's %s; the stand-in runtime must have started it elsewhere", seen)
	}
	v := verified(t, dbg, "pid")
	if v.Result != oci.NotJoined || v.ReasonKind != "runtime_not_joined" || "pid:["+strconv.FormatUint(v.Inode, 10)+"]" != seen || v.Stopped {
		t.Errorf("check after the start = %+v, want not_joined, seen in %s (the app's %s)", v, seen, appNS)
	}
	if rec := direct.Info(t, dbg).Record(t); rec.RuntimeHandler != nojoinHandler {
		t.Errorf("record's runtime handler %q, want %s", rec.RuntimeHandler, nojoinHandler)
	}
	e := api.eventOn(t, p, "debug", "TargetNotJoined")
	want := "Container debug was pointed at the pid namespace of target container app, but its init process is in " + seen + ", not in app's " + appNS +
		": the pod's runtime handler nojoin did not join the namespace path (VM and user-space-kernel runtimes run the pod in a kernel of their own). " +
		"It does not see app's processes. cri-nstarget falls back before create for runtime handler nojoin from now on; " +
		"to debug app from inside its namespaces, use a runtime handler that joins namespace paths (runc)."
	if e.Type != "Warning" || e.Message != want {
		t.Errorf("event %s %s %q\nwant Warning TargetNotJoined %q", e.Type, e.Reason, e.Message, want)
	}
	if b, err := os.ReadFile(filepath.Join(s.StateDir(), "runtime-handlers.json")); err != nil || !strings.Contains(string(b), `"`+nojoinHandler+`"`) {
		t.Errorf("the state dir's runtime-handler table does not name %s: %q, %v", nojoinHandler, b, err)
	}

	next := mustCreate(t, direct, p, "debug2", targetOf(app))
	if r := direct.Info(t, next).Record(t).Namespaces["pid"]; r.Result != oci.Fallback || r.ReasonKind != "runtime_cannot_join" {
		t.Errorf("next create's record %+v, want a fallback runtime_cannot_join", r)
	}
	for _, m := range mountsUnder(t, s.StateDir()) {
		if strings.Contains(m, next) {
			t.Errorf("a pin of a fallback before create: %s", m)
		}
	}
	_, text := httpGet(t, "http://"+metricsAddr(t, s.LogPath())+"/metrics")
	for sample, want := range map[string]string{
		`cri_nstarget_targeting_total{mode="plugin",namespace="pid",reason="none",result="targeted",stage="create"}`:                 "1",
		`cri_nstarget_targeting_total{mode="plugin",namespace="pid",reason="runtime_not_joined",result="not_joined",stage="verify"}`: "1",
		`cri_nstarget_targeting_total{mode="plugin",namespace="pid",reason="runtime_cannot_join",result="fallback",stage="create"}`:  "1",
	} {
		if got := metricValue(text, sample); got != want {
			t.Errorf("%s = %q, want %s", sample, got, want)
		}
	}
}
