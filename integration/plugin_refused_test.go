//go:build integration

package integration

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/critesting"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// The plugin mode on a containerd whose NRI default validator refuses
// namespace adjustments (default_validator.reject_namespace_adjustment):
// containerd gives no sign of it before a create (no NRI version, nothing
// at registration, no introspection of NRI's configuration), so the first
// TARGET create the plugin pins is refused by containerd, as it is without
// the plugin's knowing. The plugin then says so (/healthz 503 with what it
// saw, its log) and does nothing else: the next TARGET create is
// containerd's own (its /proc/<pid>/ns/pid, no pin, no record), and joins.
func TestPluginModeNamespaceAdjustmentRefused(t *testing.T) {
	requireNRI(t)
	e, err := harness.StartWith(ctx(t), harness.EnvOptions{NRIValidator: "enable = true\nreject_namespace_adjustment = true"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.PullImages(ctx(t), e.Containerd.Endpoint()); err != nil {
		t.Fatal(err)
	}
	conn, err := harness.Dial(e.Containerd.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := critesting.New(conn)
	s, err := harness.StartPlugin(ctx(t), shimBin, filepath.Join(tmp, "prefused"), e.Containerd, "--metrics-address", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(s.LogPath())
			t.Logf("plugin log:\n%s", b)
		}
		s.Close()
	}()
	healthz := "http://" + metricsAddr(t, s.LogPath()) + "/healthz"
	eventually(t, "the plugin to be ready", func() bool { code, _ := httpGet(t, healthz); return code == http.StatusOK })

	sb := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "prefused", Uid: fmt.Sprint("uid-prefused-", os.Getpid()), Namespace: "nst"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: ownMode}}},
	}
	ps, err := c.Runtime.RunPodSandbox(ctx(t), &runtimeapi.RunPodSandboxRequest{Config: sb})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.Runtime.StopPodSandbox(ctx(t), &runtimeapi.StopPodSandboxRequest{PodSandboxId: ps.GetPodSandboxId()})
		c.Runtime.RemovePodSandbox(ctx(t), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: ps.GetPodSandboxId()})
	}()
	create := func(name string, ns *runtimeapi.NamespaceOption) (string, error) {
		r, err := c.Runtime.CreateContainer(ctx(t), &runtimeapi.CreateContainerRequest{PodSandboxId: ps.GetPodSandboxId(), SandboxConfig: sb,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: e.BusyboxImage},
				Command: []string{"sleep", "3600"}, Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}}}})
		return r.GetContainerId(), err
	}
	app, err := create("app", pidOwn)
	if err != nil {
		t.Fatal(err)
	}
	mustStart(t, c, app)

	// the first TARGET create: pinned by the plugin, refused by containerd
	if _, err := create("debug", targetOf(app)); err == nil || !strings.Contains(err.Error(), "namespace adjustment") {
		t.Fatalf("the first TARGET create: %v, want containerd's validator refusing the plugin's namespace adjustment", err)
	}
	var body string
	eventually(t, "the plugin to say it is not ready, and why", func() bool {
		var code int
		code, body = httpGet(t, healthz)
		return code == http.StatusServiceUnavailable
	})
	if !strings.Contains(body, "containerd undid its create of container") || !strings.Contains(body, "pod nst/prefused") {
		t.Errorf("/healthz says %q, want what the plugin saw (containerd undid the create it pinned, in pod nst/prefused)", body)
	}
	if b, _ := os.ReadFile(s.LogPath()); !strings.Contains(string(b), "containerd refuses the plugin's namespace adjustments") {
		t.Error("the plugin's log does not say containerd refuses its namespace adjustments")
	}

	// the kubelet's retry: containerd's own TARGET, nothing of the plugin's
	dbg, err := create("debug", targetOf(app))
	if err != nil {
		t.Fatalf("the TARGET create after the refusal: %v, want containerd's own", err)
	}
	mustStart(t, c, dbg)
	ci := c.Info(t, dbg)
	if got, want := nsPath(ci, "pid"), fmt.Sprintf("/proc/%d/ns/pid", c.Info(t, app).Pid); got != want {
		t.Errorf("debug container's pid namespace %q, want containerd's own %q", got, want)
	}
	if _, ok, _ := oci.ParseRecord(ci.RuntimeSpec.Annotations); ok {
		t.Errorf("debug container has the plugin's record %s: it should have done nothing", ci.RuntimeSpec.Annotations[oci.AnnotationTargeting])
	}
	if m := mountsUnder(t, s.StateDir()); len(m) != 0 {
		t.Errorf("pins after the refusal: %v", m)
	}
	if got, want := nsInside(t, c, dbg, "pid"), nsInside(t, c, app, "pid"); got != want {
		t.Errorf("debug container in pid namespace %s, want the app's %s", got, want)
	}
	if code, _ := httpGet(t, healthz); code != http.StatusServiceUnavailable {
		t.Errorf("/healthz %d after the refusal, want 503 until containerd's NRI connects the plugin again", code)
	}
}
