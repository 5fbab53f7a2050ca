//go:build integration

package integration

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// nojoinHandler is the runtime handler containerd runs beside runc here
// (main_test.go): the stand-in for a sandboxed runtime (a VM or
// user-space-kernel runtime such as Kata or gVisor, which runs the pod in a
// kernel of its own and ignores the namespace paths a spec names): runc
// behind a wrapper (internal/nojoinruntime) that removes the PID namespace
// path from the bundle on create. Its type is runc's, so nothing tells the
// shim beforehand.
const nojoinHandler = "nojoin"

// hostNetOwn: a host-network pod whose containers each have a PID
// namespace of their own, as runPod makes them.
var hostNetOwn = &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: ownMode}

// verified waits (10 s) for the shim's check after the start of container
// id to be in its record, for namespace kind, and returns it.
func verified(t *testing.T, id, kind string) oci.Verification {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if v := direct.Info(t, id).Record(t).Namespaces[kind].Verify; v != nil {
			return *v
		}
		if time.Now().After(deadline) {
			t.Fatalf("no check after the start of %.12s in its record within 10 s", id)
		}
	}
}

// A debug container in a pod of the stand-in for a sandboxed runtime is
// pointed at the pin and starts in a PID namespace of its own: the check
// after its start says not_joined, the handler is learnt, and the next
// TARGET create in its pods falls back before anything is pinned. In
// strict mode the one that did not join is stopped (its start had been
// answered), and the next is refused.
func TestSandboxedRuntimeNotJoined(t *testing.T) {
	for _, strict := range []bool{false, true} {
		t.Run(map[bool]string{false: "fallback", true: "strict"}[strict], func(t *testing.T) {
			s := startShimStrict(t, strict)
			c := shimCRI(s)
			p := runPodOn(t, c, nojoinHandler, hostNetOwn)
			app := run(t, c, p, "app", pidOwn, "sleep", "3611")
			appNS := nsOfPid(t, pidOf(t, app), "pid")
			dbg := run(t, c, p, "debug", targetOf(app))
			if path, pin := nsPath(direct.Info(t, dbg), "pid"), s.StateDir()+"/pins/"+dbg+"/pid"; path != pin {
				t.Fatalf("spec pid path %q, want the pin %q", path, pin)
			}
			v := verified(t, dbg, "pid")
			if v.Result != oci.NotJoined || v.ReasonKind != "runtime_not_joined" || "pid:["+strconv.FormatUint(v.Inode, 10)+"]" == appNS || v.Stopped != strict {
				t.Errorf("check after the start = %+v, want not_joined outside the app's %s (stopped: %v)", v, appNS, strict)
			}
			if rec := direct.Info(t, dbg).Record(t); rec.RuntimeHandler != nojoinHandler {
				t.Errorf("record's runtime handler %q, want %s", rec.RuntimeHandler, nojoinHandler)
			}
			if strict {
				eventually(t, "strict mode to stop the debug container", func() bool {
					resp, err := direct.Runtime.ContainerStatus(ctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: dbg})
					return err == nil && resp.GetStatus().GetState() == runtimeapi.ContainerState_CONTAINER_EXITED
				})
			} else if ns := nsInside(t, c, dbg, "pid"); ns == appNS {
				t.Errorf("the debug container is in the app's %s; the stand-in runtime must have started it elsewhere", ns)
			}
			next, err := createIn(t, c, p, "debug2", targetOf(app))
			if strict {
				if err == nil || !strings.Contains(err.Error(), "runtime_cannot_join") {
					t.Errorf("strict create after the handler was learnt: %v, want a refusal runtime_cannot_join", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if r := direct.Info(t, next).Record(t).Namespaces["pid"]; r.Result != oci.Fallback || r.ReasonKind != "runtime_cannot_join" || r.Path != "" {
				t.Errorf("next create's record %+v, want a fallback runtime_cannot_join, pointed at nothing", r)
			}
			if m := mountsUnder(t, s.StateDir()+"/pins/"+next); len(m) > 0 {
				t.Errorf("pins of a fallback before create: %v", m)
			}
		})
	}
}

// A runtime handler configured as unable to join (runtime_handlers_without_join):
// a TARGET create in its pods falls back before anything is made, also for
// a shim started after the pod was (the pod's handler is then learnt from
// the backend). Each shim read containerd's runtimes, with their types,
// from its verbose Status (auto, the default, decides by them: unit-tested
// on what 2.4.2, 2.3.7 and 1.7.35 answer, server/testdata).
func TestConfiguredHandlerCannotJoin(t *testing.T) {
	const flag = "--runtime-handlers-without-join=auto," + nojoinHandler
	first := startShim(t, flag)
	p := runPodOn(t, shimCRI(first), nojoinHandler, hostNetOwn)
	app := run(t, shimCRI(first), p, "app", pidOwn, "sleep", "3612")
	for i, s := range []*harness.Shim{first, startShim(t, flag)} {
		dbg, err := createIn(t, shimCRI(s), p, "debug"+strconv.Itoa(i), targetOf(app))
		if err != nil {
			t.Fatal(err)
		}
		r := direct.Info(t, dbg).Record(t).Namespaces["pid"]
		if r.Result != oci.Fallback || r.ReasonKind != "runtime_cannot_join" || !strings.Contains(r.Reason, "runtime_handlers_without_join lists it") {
			t.Errorf("shim %d: record %+v, want a fallback runtime_cannot_join, configured", i, r)
		}
		if log, _ := os.ReadFile(s.LogPath()); !strings.Contains(string(log), "runtimes=\"map["+nojoinHandler+":io.containerd.runc.v2 runc:io.containerd.runc.v2]\"") {
			t.Errorf("shim %d did not read containerd's runtimes from its Status:\n%s", i, log)
		}
	}
}
