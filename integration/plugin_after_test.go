//go:build integration

package integration

import (
	"testing"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// The plugin mode after the answer, through containerd's own CRI socket:
// the exit of a joined target, and containerd restarted under the plugin.

// The target of a debug container the plugin pinned exits: the kernel
// kills the debug container with it (137), and the plugin says why, as the
// proxy does: a Warning TargetExited on the pod with the proxy's text, and
// the record's targetExited.
func TestPluginModeTargetExited(t *testing.T) {
	api := newEventsAPI(t)
	startPlugin(t, shimBin, "--events-kubeconfig", api.kubeconfig(t, t.TempDir()))
	p := runPod(t, direct, ownMode)
	api.addPod(p)
	app := run(t, direct, p, "app", pidOwn, "sh", "-c", "while [ ! -e /tmp/go ]; do sleep 0.1; done; exit 3")
	dbg := run(t, direct, p, "debug", targetOf(app), "sleep", "3654")
	if v := verified(t, dbg, "pid"); v.Result != oci.Joined {
		t.Fatalf("check after the start = %+v, want joined", v)
	}
	execIn(t, direct, app, "touch", "/tmp/go")
	e := api.eventOn(t, p, "debug", "TargetExited")
	want := "Target container app exited (exit code 3), and the kernel killed container debug with it: debug ran in app's pid namespace, " +
		"and when a PID namespace's init (here app's process) exits, every other process in it is killed. That is why debug ended with exit code 137."
	if e.Type != "Warning" || e.Message != want {
		t.Errorf("event %s %s %q\nwant Warning TargetExited %q", e.Type, e.Reason, e.Message, want)
	}
	eventually(t, "the record to say the target exited", func() bool {
		x := direct.Info(t, dbg).Record(t).TargetExited
		return x != nil && x.ExitCode == 3
	})
}

// containerd restarted under the plugin: the plugin connects again by
// itself (containerd synchronizes it), keeps the pin of a debug container
// created before the restart and not yet started, which then starts in its
// target's namespace, and pins the next TARGET create.
func TestPluginModeContainerdRestarted(t *testing.T) {
	s := startPlugin(t, shimBin)
	p := runPod(t, direct, ownMode)
	app := run(t, direct, p, "app", pidOwn, "sleep", "3655")
	before := mustCreate(t, direct, p, "before", targetOf(app))
	syncs := s.Syncs()
	if err := env.Containerd.Restart(ctx(t)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "containerd to synchronize the plugin again", func() bool { return s.Syncs() > syncs })
	if got := nsPath(direct.Info(t, before), "pid"); got != pinNameOf(s, before) {
		t.Fatalf("the container created before the restart names pid namespace %q, want the pin %s", got, pinNameOf(s, before))
	}
	mustStart(t, direct, before)
	appNS := nsInside(t, direct, app, "pid")
	if got := nsInside(t, direct, before, "pid"); got != appNS {
		t.Errorf("the container created before containerd's restart, started after it, runs in pid namespace %s, want the app's %s", got, appNS)
	}
	after := run(t, direct, p, "after", targetOf(app))
	if got := nsPath(direct.Info(t, after), "pid"); got != pinNameOf(s, after) {
		t.Errorf("a TARGET create after containerd's restart names pid namespace %q, want the plugin's pin %s", got, pinNameOf(s, after))
	}
	if got := nsInside(t, direct, after, "pid"); got != appNS {
		t.Errorf("after containerd's restart: debug in pid namespace %s, want the app's %s", got, appNS)
	}
}
