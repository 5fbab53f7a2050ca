package conformance

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/conformance/claims"
)

var (
	own  = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}
	pidT = func(target string) *runtimeapi.NamespaceOption {
		return &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: target}
	}
)

// TestTarget is the suite. Cases run one after another; each makes its own
// pods and removes them.
// A case --mode does not claim is not run, and reported so with why; or,
// when only one failure of it is not claimed, run (runCase).
func TestTarget(t *testing.T) {
	for _, k := range suiteCases() {
		if casesFilter != nil && !casesFilter.MatchString(k.id) {
			continue
		}
		if cl, ok := claims.Unclaimed(suite.claims, k.id); ok && !cl.Runs() {
			addResult(Result{Case: k.id, Title: k.title, Result: claims.NotClaimed, Reason: cl.Said("")})
			continue
		}
		runCase(t, k.id, k.title, k.run)
	}
}

// suiteCase is one case: its id (the subtest's name, what --cases
// matches), what passes, and the case itself.
type suiteCase struct {
	id, title string
	run       func(c *tc)
}

// suiteCases lists the cases in the order they run (--list prints them).
func suiteCases() []suiteCase {
	var all []suiteCase
	add := func(id, title string, f func(c *tc)) { all = append(all, suiteCase{id, title, f}) }
	add("pid-target", "PID TARGET: the debug container sees the target's processes, in the target's PID namespace", casePIDTarget)
	add("ipc-target", "IPC TARGET: the debug container is in the target's own IPC namespace, not the pod's", caseIPCTarget)
	add("userns/pid-target", "user-namespaced pod (hostUsers: false), PID TARGET: the debug container sees the target's processes, in the target's PID namespace and the pod's user namespace", caseUsernsPIDTarget)
	add("userns/ipc-target", "user-namespaced pod (hostUsers: false), IPC TARGET: the debug container is in the target's own IPC namespace and the pod's user namespace", caseUsernsIPCTarget)
	add("target-isolation", "the target keeps its namespaces; other containers of the pod do not see it or the debug container", caseIsolation)
	add("two-debug", "two debug containers targeting one container share its PID namespace", caseTwoDebug)
	add("target-restarted", "after the target is replaced (same name, attempt+1), a debug container targeting the new one joins the new one", caseRestarted)
	add("target-exited-before-create", "target exited before CreateContainer: created in the pod's namespace, or refused cleanly", caseExitedBeforeCreate)
	add("target-exited-before-start", "target exited between CreateContainer and StartContainer: runs in the pod's namespace, or refused cleanly", caseExitedBeforeStart)
	add("pid-reuse", "target's PID reused by an unrelated process before StartContainer: never joins that process's namespace", casePIDReuse)
	add("cross-pod", "target in another pod: FailedPrecondition, nothing created", caseCrossPod)
	add("unknown-target", "unknown target_id: NotFound, nothing created", caseUnknownTarget)
	add("sandbox-as-target", "a pod sandbox id as target_id: NotFound, nothing created", caseSandboxAsTarget)
	add("missing-target-id", "TARGET without target_id: InvalidArgument, nothing created", refusal("", codes.InvalidArgument))
	for _, m := range []struct{ name, id string }{
		{"path", "../../proc/self"},
		{"absolute-path", "/proc/1/ns/pid"},
		{"nul", "abc\x00def"},
		{"too-long", strings.Repeat("f", 4096)},
		{"space", "abc def"},
	} {
		add("malformed-target-id/"+m.name, fmt.Sprintf("malformed target_id (%s, %q): InvalidArgument, nothing created", m.name, clip(m.id)), refusal(m.id, codes.InvalidArgument))
	}
	add("network-target", "NamespaceMode TARGET for the network namespace: InvalidArgument, nothing created", caseNetworkTarget)
	add("unknown-mode/pid", "unknown NamespaceMode value for pid: created in the pod's namespace, or InvalidArgument", unknownMode("pid"))
	add("unknown-mode/ipc", "unknown NamespaceMode value for ipc: created in the pod's namespace, or InvalidArgument", unknownMode("ipc"))
	add("removal-order", "target removed before its debug container: both removals succeed", caseRemovalOrder)
	return all
}

func clip(s string) string {
	if len(s) > 20 {
		return s[:20] + "..."
	}
	return s
}

// targetPod runs a pod (edited by edit) with the reference container and an
// app container in its own PID namespace; it returns the pod, its
// namespaces, the app and the app's command.
func targetPod(c *tc, edit ...func(*runtimeapi.PodSandboxConfig)) (*pod, podNS, string, []string) {
	c.Helper()
	p := c.newPod("target", edit...)
	pns := c.podNamespaces(p)
	appCmd := marker()
	app := c.run(p, ctr{name: "app", cmd: appCmd, ns: own})
	if got := c.ns("app", app, "pid"); got == pns.pid {
		c.fatalf("setup: the app (NamespaceMode CONTAINER) is in the pod's PID namespace %s: the runtime ignores CONTAINER, targeting cannot be told apart", got)
	}
	return p, pns, app, appCmd
}

func casePIDTarget(c *tc) {
	p, pns, app, appCmd := targetPod(c)
	checkPIDTarget(c, p, pns, app, appCmd)
}

// checkPIDTarget runs a debug container with pid TARGET of app in p and
// checks it is in app's PID namespace and sees appCmd; it returns its id.
func checkPIDTarget(c *tc, p *pod, pns podNS, app string, appCmd []string) string {
	c.Helper()
	dbg := c.run(p, ctr{name: "debug", ns: pidT(app)})
	appNS, dbgNS := c.ns("app", app, "pid"), c.ns("debug", dbg, "pid")
	c.saw("debug %s, target %s, pod %s", dbgNS, appNS, pns.pid)
	if dbgNS != appNS {
		where := "an unrelated namespace"
		if dbgNS == pns.pid {
			where = "the pod's namespace"
		}
		c.errorf("debug container is in %s (%s), not the target's %s", where, dbgNS, appNS)
	}
	if ps := c.procs("debug", dbg); !sees(ps, appCmd) {
		c.errorf("debug container does not see the target's process %q:\n%s", strings.Join(appCmd, " "), ps)
	}
	c.pinnedByPlugin("debug", dbg)
	return dbg
}

func caseIPCTarget(c *tc) {
	p := c.newPod("ipc")
	checkIPCTarget(c, p, c.podNamespaces(p))
}

// checkIPCTarget runs in p an app that enters an IPC namespace of its own
// and a debug container with ipc (and pid) TARGET of the app, and checks the
// debug container is in the app's IPC namespace. It returns the app and the
// debug container.
func checkIPCTarget(c *tc, p *pod, pns podNS) (app, dbg string) {
	c.Helper()
	// The runtime puts every container in the pod's IPC namespace; the app
	// enters one of its own, so that only real targeting can join it.
	app = c.run(p, ctr{name: "app", cmd: append([]string{"unshare", "-i"}, marker()...), ns: own, caps: []string{"SYS_ADMIN"}})
	var appIPC string
	c.eventually("the app to enter its own IPC namespace (unshare -i)", func() error {
		out, err := c.exec(app, "readlink", "/proc/1/ns/ipc")
		if err != nil {
			return err
		}
		if appIPC = out; appIPC == pns.ipc {
			return fmt.Errorf("still in the pod's %s", appIPC)
		}
		return nil
	})
	dbg = c.run(p, ctr{name: "debug", ns: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, Ipc: runtimeapi.NamespaceMode_TARGET, TargetId: app}})
	dbgIPC := c.ns("debug", dbg, "ipc")
	c.saw("debug %s, target %s, pod %s", dbgIPC, appIPC, pns.ipc)
	switch dbgIPC {
	case appIPC:
	case pns.ipc:
		c.errorf("debug container is in the pod's IPC namespace %s, not the target's %s: IPC TARGET ignored", dbgIPC, appIPC)
	default:
		c.errorf("debug container is in an unrelated IPC namespace %s (target's %s, pod's %s)", dbgIPC, appIPC, pns.ipc)
	}
	return app, dbg
}

func caseIsolation(c *tc) {
	p, pns, app, appCmd := targetPod(c)
	before := map[string]string{}
	for _, k := range []string{"pid", "ipc", "mnt"} {
		before[k] = c.initNS("app", app, k)
	}
	dbgCmd := marker()
	dbg := c.run(p, ctr{name: "debug", cmd: dbgCmd, ns: pidT(app)})
	for k, was := range before {
		if now := c.initNS("app", app, k); now != was {
			c.errorf("the target's %s namespace changed from %s to %s when the debug container started", k, was, now)
		}
	}
	if pid1, err := hostPidOf(c.procs("app", app), appCmd); err != nil || pid1 != 1 {
		c.errorf("the target's process %q is not its PID 1 any more (pid %d, %v)", strings.Join(appCmd, " "), pid1, err)
	}
	if m := c.ns("debug", dbg, "mnt"); m == before["mnt"] {
		c.errorf("debug container shares the target's mount namespace %s", m)
	}
	ref := c.procs("ref", pns.ref)
	if sees(ref, appCmd) || sees(ref, dbgCmd) {
		c.errorf("a container in the pod's PID namespace sees the target's or the debug container's processes:\n%s", ref)
	}
	c.saw("target pid/ipc/mnt unchanged (%s, %s); pod's other containers see neither", before["pid"], before["ipc"])
}

func caseTwoDebug(c *tc) {
	p, _, app, appCmd := targetPod(c)
	cmd1, cmd2 := marker(), marker()
	d1 := c.run(p, ctr{name: "debug-1", cmd: cmd1, ns: pidT(app)})
	d2 := c.run(p, ctr{name: "debug-2", cmd: cmd2, ns: pidT(app)})
	appNS := c.ns("app", app, "pid")
	n1, n2 := c.ns("debug-1", d1, "pid"), c.ns("debug-2", d2, "pid")
	c.saw("target %s, debug-1 %s, debug-2 %s", appNS, n1, n2)
	if n1 != appNS || n2 != appNS {
		c.errorf("debug containers in %s and %s, want both in the target's %s", n1, n2, appNS)
	}
	for _, d := range []struct{ name, id string }{{"debug-1", d1}, {"debug-2", d2}} {
		if ps := c.procs(d.name, d.id); !sees(ps, appCmd) || !sees(ps, cmd1) || !sees(ps, cmd2) {
			c.errorf("%s does not see the target and both debug containers:\n%s", d.name, ps)
		}
	}
}

// A kubelet restart of a container is a new container of the same name with
// attempt+1; the old one stays, exited. Targeting the new id must join the
// new container's namespace.
func caseRestarted(c *tc) {
	p, pns, app0, _ := targetPod(c)
	c.stop("app", app0)
	cmd1 := marker()
	app1 := c.run(p, ctr{name: "app", attempt: 1, cmd: cmd1, ns: own})
	newNS := c.ns("app (attempt 1)", app1, "pid")
	dbg := c.run(p, ctr{name: "debug", ns: pidT(app1)})
	got := c.ns("debug", dbg, "pid")
	c.saw("debug %s, new target %s, pod %s", got, newNS, pns.pid)
	if got != newNS {
		c.errorf("debug container is in %s, not the restarted target's %s", got, newNS)
	}
	if ps := c.procs("debug", dbg); !sees(ps, cmd1) {
		c.errorf("debug container does not see the restarted target's process:\n%s", ps)
	}
}

// A target that exited before CreateContainer has no namespace left to join.
// Accepted: refused (FailedPrecondition or NotFound) with nothing created;
// or created and then running in the pod's PID namespace; or created and
// refused at start with FailedPrecondition.
func caseExitedBeforeCreate(c *tc) {
	p, pns, app, _ := targetPod(c)
	c.stop("app", app)
	before := len(c.containersIn(p))
	dbg, err := c.create(p, ctr{name: "debug", ns: pidT(app)})
	if err != nil {
		if !cleanRefusal(err, codes.FailedPrecondition, codes.NotFound) {
			c.fatalf("CreateContainer refused with %s; a refusal must be FailedPrecondition (or NotFound)", short(err))
		}
		if after := len(c.containersIn(p)); after != before {
			c.fatalf("CreateContainer refused (%s) but left a container: %d before, %d after", short(err), before, after)
		}
		c.saw("refused at create: %s", code(err))
		return
	}
	checkFallbackStart(c, "before create", dbg, pns)
}

// The target exits between CreateContainer and StartContainer. Accepted:
// the debug container runs in the pod's PID namespace, or StartContainer is
// refused with FailedPrecondition.
func caseExitedBeforeStart(c *tc) {
	p, pns, app, _ := targetPod(c)
	dbg := c.mustCreate(p, ctr{name: "debug", ns: pidT(app)})
	c.stop("app", app)
	checkFallbackStart(c, "after create", dbg, pns)
}

// checkFallbackStart starts a debug container whose target is gone: it must
// run in the pod's PID namespace or be refused with FailedPrecondition.
func checkFallbackStart(c *tc, when, dbg string, pns podNS) {
	c.Helper()
	if err := c.start(dbg); err != nil {
		if !cleanRefusal(err, codes.FailedPrecondition) {
			c.fatalf("StartContainer failed with %s; when the target's namespace is gone, start must run the container in the pod's namespace or refuse with FailedPrecondition", short(err))
		}
		c.saw("target exited %s: created, StartContainer refused with %s", when, code(err))
		return
	}
	got := c.ns("debug", dbg, "pid")
	if got != pns.pid {
		c.fatalf("debug container runs in %s, neither the pod's PID namespace %s nor its (exited) target's", got, pns.pid)
	}
	c.saw("target exited %s: runs in the pod's PID namespace (fallback)", when)
}

// The target is killed after CreateContainer and an unrelated process takes
// its PID before StartContainer. A runtime that joins /proc/<pid>/ns/pid at
// start puts the debug container into that process's namespace (here the
// host's). Needs a privileged helper in the host PID namespace to find the
// PID and to take it (ns_last_pid).
func casePIDReuse(c *tc) {
	if !*privileged {
		c.skipf("needs a privileged host-PID helper container (--privileged=false)")
	}
	p, pns, app, appCmd := targetPod(c)
	hp := c.newPod("helper", func(cfg *runtimeapi.PodSandboxConfig) {
		sc := cfg.Linux.SecurityContext
		sc.Privileged = true
		sc.NamespaceOptions.Pid = runtimeapi.NamespaceMode_NODE
	})
	helper := c.run(hp, ctr{name: "helper", privileged: true, ns: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_NODE}})
	hostNS := c.ns("helper", helper, "pid")
	pid, err := hostPidOf(c.procs("helper", helper), appCmd)
	if err != nil {
		c.fatalf("setup: find the target's host PID from the host-PID helper: %v", err)
	}
	dbg := c.mustCreate(p, ctr{name: "debug", ns: pidT(app)})
	c.stop("app", app)
	c.eventually(fmt.Sprintf("host PID %d to be free", pid), func() error {
		if _, err := c.exec(helper, "sh", "-c", "[ ! -e /proc/"+strconv.Itoa(pid)+" ]"); err != nil {
			return fmt.Errorf("PID %d still exists", pid)
		}
		return nil
	})
	// Fork `sleep` until it gets the PID: ns_last_pid = pid-1, then fork.
	script := fmt.Sprintf(`i=0; while [ $i -lt 100 ]; do echo %d > /proc/sys/kernel/ns_last_pid || exit 3; sleep 599 </dev/null >/dev/null 2>&1 & c=$!; [ $c = %d ] && { echo $c; exit 0; }; kill $c; i=$((i+1)); done; exit 4`, pid-1, pid)
	if _, err := c.exec(helper, "sh", "-c", script); err != nil {
		c.skipf("could not start an impostor with PID %d (other processes forked first, or ns_last_pid is not writable): %v", pid, err)
	}
	impostorNS := c.mustExec("read the impostor's namespace", helper, "readlink", fmt.Sprintf("/proc/%d/ns/pid", pid))
	c.saw("impostor took PID %d (namespace %s)", pid, impostorNS)
	if err := c.start(dbg); err != nil {
		if !cleanRefusal(err, codes.FailedPrecondition) {
			c.fatalf("StartContainer failed with %s; want the pod's namespace or FailedPrecondition", short(err))
		}
		c.saw("StartContainer refused with %s", code(err))
		return
	}
	got := c.ns("debug", dbg, "pid")
	switch got {
	case pns.pid:
		c.saw("runs in the pod's PID namespace (fallback)")
	case impostorNS, hostNS:
		c.fatalf("debug container joined the PID namespace %s of the unrelated process %d that reused the target's PID", got, pid)
	default:
		c.fatalf("debug container runs in %s, neither the pod's %s nor its (dead) target's", got, pns.pid)
	}
}

// refusal returns a case that asks for pid TARGET of target (as given) and
// expects the code, with no container left.
func refusal(target string, want codes.Code) func(c *tc) {
	return func(c *tc) {
		p, _, _, _ := targetPod(c)
		expectRefusal(c, p, ctr{name: "debug", ns: pidT(target)}, want)
	}
}

func expectRefusal(c *tc, p *pod, s ctr, want codes.Code) {
	c.Helper()
	before := len(c.containersIn(p))
	id, err := c.create(p, s)
	after := len(c.containersIn(p))
	if err == nil {
		c.fatalf("CreateContainer succeeded (container %s), want %s", id, want)
	}
	c.saw("%s", short(err))
	if code(err) != want {
		c.errorf("CreateContainer refused with %s, want %s", code(err), want)
	}
	if after != before {
		c.errorf("the refused CreateContainer left a container: %d before, %d after", before, after)
	}
}

func caseCrossPod(c *tc) {
	_, _, app, _ := targetPod(c)
	other := c.newPod("other")
	expectRefusal(c, other, ctr{name: "debug", ns: pidT(app)}, codes.FailedPrecondition)
}

func caseUnknownTarget(c *tc) {
	p, _, _, _ := targetPod(c)
	expectRefusal(c, p, ctr{name: "debug", ns: pidT(randHex(32))}, codes.NotFound)
}

func caseSandboxAsTarget(c *tc) {
	p, _, _, _ := targetPod(c)
	expectRefusal(c, p, ctr{name: "debug", ns: pidT(p.id)}, codes.NotFound)
}

func caseNetworkTarget(c *tc) {
	p, _, app, _ := targetPod(c)
	expectRefusal(c, p, ctr{name: "debug", ns: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER, Network: runtimeapi.NamespaceMode_TARGET, TargetId: app}}, codes.InvalidArgument)
}

// unknownMode asks for NamespaceMode 7 (no such value) for kind. Accepted:
// created and running in the pod's namespace of that kind, or
// InvalidArgument with nothing created. Never Unknown or Internal.
func unknownMode(kind string) func(c *tc) {
	return func(c *tc) {
		p := c.newPod("mode")
		pns := c.podNamespaces(p)
		ns := &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD}
		want := pns.pid
		if kind == "pid" {
			ns.Pid = 7
		} else {
			ns.Ipc, want = 7, pns.ipc
		}
		before := len(c.containersIn(p))
		id, err := c.create(p, ctr{name: "odd", ns: ns})
		if err != nil {
			if code(err) != codes.InvalidArgument {
				c.fatalf("CreateContainer: %s; an unknown NamespaceMode must be handled (pod's namespace) or refused with InvalidArgument", short(err))
			}
			if after := len(c.containersIn(p)); after != before {
				c.fatalf("refused (%s) but left a container", short(err))
			}
			c.saw("refused at create: %s", code(err))
			return
		}
		if err := c.start(id); err != nil {
			c.fatalf("created, but StartContainer failed: %s", short(err))
		}
		got := c.ns("odd", id, kind)
		if got != want {
			c.fatalf("container runs in %s namespace %s, not the pod's %s", kind, got, want)
		}
		c.saw("created in the pod's %s namespace", kind)
	}
}

func caseRemovalOrder(c *tc) {
	p, _, app, _ := targetPod(c)
	dbg := c.run(p, ctr{name: "debug", ns: pidT(app)})
	c.stop("app", app)
	if _, err := suite.rt.RemoveContainer(c.ctx, &runtimeapi.RemoveContainerRequest{ContainerId: app}); err != nil {
		c.fatalf("RemoveContainer of the target (while its debug container exists): %s", short(err))
	}
	// The debug container died with the target's PID namespace; stop waits
	// until the runtime reports it exited (containerd 1.6's StopContainer may
	// answer before its status has caught up).
	c.stop("debug", dbg)
	if _, err := suite.rt.RemoveContainer(c.ctx, &runtimeapi.RemoveContainerRequest{ContainerId: dbg}); err != nil {
		c.fatalf("RemoveContainer of the debug container after its target was removed: %s", short(err))
	}
	for _, id := range c.containersIn(p) {
		if id == app || id == dbg {
			c.fatalf("container %s still listed after RemoveContainer", id)
		}
	}
	c.saw("both removed")
}
