//go:build integration

package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// noSysAdmin runs the plugin without CAP_SYS_ADMIN (its bounding set and
// inheritable set without it, so root's exec does not get it): its mount(2)
// is refused, as containerd's default AppArmor profile refuses it to a pod
// that has the capability (deploy/plugin's appArmorProfile says why).
var noSysAdmin = []string{"setpriv", "--bounding-set", "-sys_admin", "--inh-caps", "-sys_admin", "--"}

// A plugin that cannot pin finds out by its trial pin at its start: it is
// not Ready, its /healthz says why, and it never connects to containerd's
// NRI. So a TARGET create is containerd's own, unpinned and unrecorded,
// rather than a fallback the plugin made; and nothing of it stays mounted.
func TestPluginModeCannotPin(t *testing.T) {
	requireNRI(t)
	dir := filepath.Join(tmp, fmt.Sprintf("s%d", shimCount.Add(1)))
	s, err := harness.StartPluginUnready(context.Background(), noSysAdmin, shimBin, dir, env.Containerd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(s.LogPath())
			t.Logf("plugin log:\n%s", b)
		}
		if err := s.Close(); err != nil {
			t.Errorf("stop the plugin: %v", err)
		}
	})
	code, body := httpGet(t, "http://"+metricsAddr(t, s.LogPath())+"/healthz")
	if code != http.StatusServiceUnavailable || !strings.Contains(body, "a trial pin") || !strings.Contains(body, "operation not permitted") {
		t.Errorf("/healthz %d %q, want 503 saying its trial pin failed: operation not permitted", code, body)
	}
	p := runPod(t, direct, ownMode)
	app := run(t, direct, p, "app", pidOwn)
	dbg := mustCreate(t, direct, p, "debug", targetOf(app))
	ci := direct.Info(t, dbg)
	if got, want := nsPath(ci, "pid"), fmt.Sprintf("/proc/%d/ns/pid", pidOf(t, app)); got != want {
		t.Errorf("the debug container's spec names pid namespace %q, want containerd's own %s: the plugin answered", got, want)
	}
	if _, ok, _ := oci.ParseRecord(ci.RuntimeSpec.Annotations); ok {
		t.Errorf("the debug container has a record of the plugin's: %s", ci.RuntimeSpec.Annotations[oci.AnnotationTargeting])
	}
	if m, err := harness.MountsUnderOf(s.PID(), s.StateDir()); err != nil || len(m) != 0 {
		t.Errorf("mounts under the plugin's state dir: %v, %v; want none", m, err)
	}
}
