//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/mod/semver"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/cluster"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// The plugin mode (issue 49) under a real kubelet: the suite's kubelet is
// moved off the shim onto containerd's own CRI endpoint, the shim stopped,
// and cri-nstarget started as an NRI plugin of containerd (--mode plugin,
// the kubelet's kubeconfig for its Events). `kubectl debug --target` then
// goes from the kubelet to containerd with no proxy between them; the
// plugin pins the target's PID namespace inside containerd's create, checks
// the join after the start and posts the Event. At the end the pod is
// deleted and its sandbox removed (the plugin's pins go with containerd's
// RemoveContainer), the plugin stopped, the shim started and the kubelet
// put back on it, as the tests that follow expect.

// minPluginContainerd is the first containerd whose NRI can adjust a
// container's namespaces (NRI v0.10), which the plugin mode answers with.
const minPluginContainerd = "v2.2.0"

// requirePluginContainerd skips t, naming the backend's version, when
// containerd is older than minPluginContainerd.
func requirePluginContainerd(t *testing.T) {
	t.Helper()
	v, err := direct.Runtime.Version(ctx(t), &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ver := v.GetRuntimeVersion()
	if !strings.HasPrefix(ver, "v") {
		ver = "v" + ver
	}
	if !semver.IsValid(ver) || semver.Compare(ver, minPluginContainerd) < 0 {
		t.Skipf("skipping on %s %s: the plugin mode needs containerd %s or later, whose NRI can adjust a container's namespaces",
			v.GetRuntimeName(), v.GetRuntimeVersion(), strings.TrimPrefix(minPluginContainerd, "v"))
	}
}

// onPlugin moves the kubelet onto containerd's own endpoint with
// cri-nstarget in the plugin mode beside it, the shim stopped, and returns
// the plugin. When t ends (after the cleanups registered later, which
// delete the pods) the pods' sandboxes named in pods are removed directly,
// the plugin's pins must be gone, and the plugin, the shim and the kubelet
// are put back as they were.
func onPlugin(t *testing.T, pods ...string) *harness.Shim {
	t.Helper()
	start := time.Now()
	if err := kube.RestartKubeletOn(ctx(t), backend.Containerd.Endpoint()); err != nil {
		t.Fatalf("restart the kubelet on containerd's endpoint: %v", err)
	}
	t.Cleanup(func() { backOnShim(t) })
	if err := shim.Stop(); err != nil {
		t.Fatalf("stop cri-nstarget (proxy): %v", err)
	}
	dir := filepath.Join(filepath.Dir(shim.Dir), "p")
	p, err := harness.StartPlugin(ctx(t), shim.Binary, dir, backend.Containerd,
		"--events-kubeconfig", cluster.KubeletKubeconfig(kube.Dir()))
	if err != nil {
		t.Fatalf("start cri-nstarget --mode plugin: %v", err)
	}
	t.Cleanup(func() { stopPlugin(t, p, pods) })
	t.Logf("kubelet (pid %d) on %s, cri-nstarget --mode plugin (pid %d) on its NRI socket, the shim stopped, in %s",
		kube.KubeletPID(), backend.Containerd.Endpoint(), p.PID(), time.Since(start).Round(100*time.Millisecond))
	return p
}

// stopPlugin removes the sandboxes of pods (deleted by then; the kubelet's
// garbage collection would take a minute) through containerd, waits for the
// plugin to release its pins, and stops it, leaving no mount behind.
func stopPlugin(t *testing.T, p *harness.Shim, pods []string) {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, pod := range pods {
		resp, err := direct.Runtime.ListPodSandbox(c, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
			LabelSelector: map[string]string{"io.kubernetes.pod.name": pod, "io.kubernetes.pod.namespace": "default"}}})
		if err != nil {
			t.Errorf("list the sandboxes of pod %s: %v", pod, err)
		}
		for _, sb := range resp.GetItems() {
			direct.Runtime.StopPodSandbox(c, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.GetId()})
			if _, err := direct.Runtime.RemovePodSandbox(c, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.GetId()}); err != nil {
				t.Errorf("remove the sandbox of pod %s: %v", pod, err)
			}
		}
	}
	var left []string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if left, _ = harness.MountsUnder(p.StateDir()); len(left) == 0 {
			break
		}
	}
	if len(left) > 0 {
		t.Errorf("the plugin's pins left once its pods' containers were removed: %v", left)
	}
	if err := p.Stop(); err != nil {
		t.Errorf("stop cri-nstarget --mode plugin: %v", err)
	}
	if t.Failed() {
		t.Logf("cri-nstarget --mode plugin log tail:\n%s", tail(p.LogPath(), 4000))
	}
	if err := harness.UnmountAll(p.StateDir()); err != nil {
		t.Errorf("unmount under %s: %v", p.StateDir(), err)
	}
}

// backOnShim starts the shim again and puts the kubelet back on it.
func backOnShim(t *testing.T) {
	c, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := shim.Start(c); err != nil {
		t.Errorf("start cri-nstarget (proxy) again: %v", err)
		return
	}
	if err := kube.RestartKubeletOn(c, shim.Endpoint()); err != nil {
		t.Errorf("restart the kubelet back on the shim: %v", err)
	}
}

// kubectl debug --target with the kubelet on containerd directly and the
// plugin attached: the kubelet's TARGET reaches containerd as it sent it
// (no proxy rewrote it to POD), the debug container sees the target's
// processes, its spec names the plugin's pin through the plugin's root (not the
// /proc/<pid>/ns/pid containerd wrote, which its record keeps as the pod's path), the plugin's
// check after the start saw it joined, and kubectl describe pod shows the
// plugin's Normal Targeted. The kubelet is the same process throughout.
func TestPluginModeDebugTarget(t *testing.T) {
	requirePluginContainerd(t)
	p := onPlugin(t, "plugin")
	kubelet := kube.KubeletPID()
	app, appNS := startApp(t, podSpec{name: "plugin"})
	dbg, out := debug(t, "plugin", "dbg-plugin", busyboxImage, "--target=app")
	if ns := firstLine(out); ns != appNS || !strings.Contains(out, "sleep "+appSleep) {
		t.Errorf("%s ran in PID namespace %q (app's %s), and must see app's process (sleep %s):\n%s", dbg.Name, ns, appNS, appSleep, out)
	}
	ci := direct.Info(t, dbg.id())
	if got := ci.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(); got != runtimeapi.NamespaceMode_TARGET {
		t.Errorf("containerd received pid mode %v for %s, want the kubelet's TARGET (no proxy between them)", got, dbg.Name)
	}
	path, _ := oci.NamespacePath(ci.RuntimeSpec, specs.PIDNamespace)
	// through the plugin's root: its pins are its own mount namespace's
	if pin := fmt.Sprintf("/proc/%d/root%s", p.PID(), filepath.Join(p.StateDir(), "pins", dbg.id(), "pid")); path != pin {
		t.Errorf("%s's spec pid namespace path = %q, want the plugin's pin %q", dbg.Name, path, pin)
	}
	rec := ci.Record(t)
	if r := rec.Namespaces["pid"]; rec.Mode != "plugin" || rec.Via != "nri" || rec.Target != app.id() || r.Result != oci.Targeted ||
		!strings.HasPrefix(r.PodPath, "/proc/") || "pid:["+strconv.FormatUint(r.Inode, 10)+"]" != appNS {
		t.Errorf("%s's record = %+v, want targeted at %s (%s) by the plugin mode through NRI, containerd's /proc path as the pod's", dbg.Name, rec, app.id(), appNS)
	}
	if v := verifiedIn(t, p.LogPath(), dbg.id(), "pid"); v.Result != oci.Joined || "pid:["+strconv.FormatUint(v.Inode, 10)+"]" != appNS {
		t.Errorf("%s's check after its start = %+v, want joined in %s", dbg.Name, v, appNS)
	}
	e := eventFrom(t, p.LogPath(), "plugin", "dbg-plugin", "")
	if want := "Container dbg-plugin joined the pid namespace of target container app, verified after it started: its init process is in " + appNS +
		" (`readlink /proc/self/ns/pid` prints it inside it), pinned by cri-nstarget; it sees app's processes."; e.Type != "Normal" || e.Reason != "Targeted" || e.Message != want {
		t.Errorf("event %s %s %q; want Normal Targeted %q", e.Type, e.Reason, e.Message, want)
	}
	operatorSees(t, "plugin", e)
	if now := kube.KubeletPID(); now != kubelet {
		t.Errorf("the kubelet is pid %d after the debug, %d before: restarted", now, kubelet)
	}
	if !t.Failed() {
		t.Logf("%s: in app's %s, spec → %s (containerd wrote %s), verified joined by the plugin; kubelet pid %d on %s throughout",
			dbg.Name, appNS, path, rec.Namespaces["pid"].PodPath, kubelet, backend.Containerd.Endpoint())
	}
}
