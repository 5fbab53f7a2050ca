//go:build e2e

package e2e

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// nojoinHandler is the containerd runtime handler (and RuntimeClass) of the
// stand-in for a sandboxed runtime: a VM or user-space-kernel runtime (Kata,
// gVisor) runs the pod in a kernel of its own, and a spec pointed at a
// namespace of the host's is ignored. The stand-in is the backend's own
// runc behind a wrapper (internal/nojoinruntime) that removes the PID
// namespace path from the bundle's config.json on create: the container
// starts in a PID namespace of its own, whatever its spec named.
const nojoinHandler = "nojoin"

// kubectl debug --target in a pod of the stand-in for a sandboxed runtime.
// The runtime's type is runc's, so nothing tells the shim beforehand: the
// spec is pointed at the pin, the debugger starts in a namespace of its
// own, and the check after its start says so (Warning TargetNotJoined,
// naming the handler), where the Event used to say it joined. The handler
// is learnt: the next debugger falls back before create. Then, with that
// learning gone and the handler configured as unable
// (runtime_handlers_without_join), a debugger falls back before create
// too: nothing is pointed at a pin, and the Warning says why in words.
func TestDebugSandboxedRuntime(t *testing.T) {
	if err := kube.Apply(ctx(t), `{"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "`+nojoinHandler+`"}, "handler": "`+nojoinHandler+`"}`); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { kube.Kubectl(ctx(t), "delete", "runtimeclass", nojoinHandler, "--ignore-not-found") })
	t.Cleanup(func() { forgetHandlers(t) })
	const pod = "sandboxed"
	_, appNS := startApp(t, podSpec{name: pod, runtimeClass: nojoinHandler})

	t.Run("pointed, started elsewhere", func(t *testing.T) {
		dbg, out := debug(t, pod, "dbg-nojoin", busyboxImage, "--target=app")
		ns := firstLine(out)
		if ns == appNS || !strings.HasPrefix(ns, "pid:[") || strings.Contains(out, "sleep "+appSleep) {
			t.Fatalf("dbg-nojoin is in %s and sees %q; the stand-in runtime must start it outside app's %s", ns, out, appNS)
		}
		ci := direct.Info(t, dbg.id())
		checkShimPinned(t, ci, dbg) // the spec was pointed at the pin
		if rec := ci.Record(t); rec.Namespaces["pid"].Result != oci.Targeted || rec.RuntimeHandler != nojoinHandler {
			t.Errorf("record %+v, want pid targeted in a pod of %s", rec, nojoinHandler)
		}
		v := verified(t, dbg.id(), "pid")
		if v.Result != oci.NotJoined || "pid:["+strconv.FormatUint(v.Inode, 10)+"]" != ns {
			t.Errorf("check after start = %+v, want not_joined, seen in %s", v, ns)
		}
		e := shimEvent(t, pod, "dbg-nojoin")
		want := "Container dbg-nojoin was pointed at the pid namespace of target container app, but its init process is in " + ns + ", not in app's " + appNS +
			": the pod's runtime handler nojoin did not join the namespace path (VM and user-space-kernel runtimes run the pod in a kernel of their own). " +
			"It does not see app's processes. cri-nstarget falls back before create for runtime handler nojoin from now on; " +
			"to debug app from inside its namespaces, use a runtime handler that joins namespace paths (runc)."
		if e.Type != "Warning" || e.Reason != "TargetNotJoined" || e.Message != want {
			t.Errorf("event %s %s %q\nwant Warning TargetNotJoined %q", e.Type, e.Reason, e.Message, want)
		}
		operatorSees(t, pod, e)
	})

	fellBack := func(t *testing.T, name, why string) {
		t.Helper()
		dbg, out := debug(t, pod, name, busyboxImage, "--target=app")
		if ns := firstLine(out); ns == appNS {
			t.Errorf("%s is in app's %s", name, ns)
		}
		rec := direct.Info(t, dbg.id()).Record(t)
		if r := rec.Namespaces["pid"]; r.Result != oci.Fallback || r.ReasonKind != "runtime_cannot_join" || r.Path != "" || !strings.Contains(r.Reason, why) {
			t.Errorf("record %+v, want a fallback runtime_cannot_join before create (%s)", r, why)
		}
		if pinned(t, dbg.id()) {
			t.Errorf("%s fell back before create, yet the shim holds pins for it", name)
		}
		e := shimEvent(t, pod, name)
		want := "Container " + name + " runs in the pod's pid namespace, not in target container app's: the pod's runtime handler nojoin does not join namespace paths " +
			"(VM and user-space-kernel runtimes run the pod in a kernel of their own), so " + name + " cannot join app's (runtime_cannot_join). It sees the pod's processes, not app's."
		if e.Type != "Warning" || e.Reason != "TargetingFallback" || e.Message != want {
			t.Errorf("event %s %s %q\nwant Warning TargetingFallback %q", e.Type, e.Reason, e.Message, want)
		}
		operatorSees(t, pod, e)
	}
	t.Run("learnt: falls back before create", func(t *testing.T) {
		fellBack(t, "dbg-learnt", "started outside the pid namespace its spec named")
	})
	t.Run("configured: falls back before create", func(t *testing.T) {
		forgetHandlers(t, "--runtime-handlers-without-join=auto,"+nojoinHandler)
		fellBack(t, "dbg-configured", "runtime_handlers_without_join lists it")
	})
}

// forgetHandlers restarts the shim with the suite's flags and extra, having
// removed what it learnt of runtime handlers (kept in its state dir).
func forgetHandlers(t *testing.T, extra ...string) {
	t.Helper()
	if err := shim.Stop(); err != nil {
		t.Fatalf("stop cri-nstarget: %v", err)
	}
	if err := os.Remove(shim.StateDir() + "/runtime-handlers.json"); err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	shim.Args = append(shim.Args[:baseArgs:baseArgs], extra...)
	if err := shim.Start(ctx(t)); err != nil {
		t.Fatalf("start cri-nstarget: %v", err)
	}
}
