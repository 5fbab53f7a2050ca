package conformance

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/conformance/claims"
)

// tc is one running case: a testing.T that also keeps what the runtime did
// (the behaviour reported for cases with more than one acceptable outcome)
// and the first failure, for the report.
type tc struct {
	*testing.T
	ctx       context.Context
	behaviour []string
	reason    string
	// claim is why --mode does not claim one failure of the case (its
	// Failure); notClaimed, what the report says once that failure came.
	claim      claims.Claim
	notClaimed string
}

// runCase runs f as subtest id and records its result.
func runCase(t *testing.T, id, title string, f func(c *tc)) {
	t.Helper()
	t.Run(id, func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), *caseTimeout)
		c := &tc{T: t, ctx: ctx}
		c.claim, _ = claims.Unclaimed(suite.claims, id)
		start := time.Now()
		// Registered first, so it runs after every other cleanup of the case.
		t.Cleanup(func() {
			cancel()
			r := Result{Case: id, Title: title, Behaviour: strings.Join(c.behaviour, "; "), Reason: c.reason,
				Seconds: time.Since(start).Round(10 * time.Millisecond).Seconds(), Result: "pass"}
			switch {
			case c.notClaimed != "":
				r.Result, r.Reason = claims.NotClaimed, c.notClaimed
			case t.Failed():
				r.Result = "fail"
				if r.Reason == "" {
					r.Reason = "failed (see the test log)"
				}
			case t.Skipped():
				r.Result = "skip"
			}
			addResult(r)
		})
		f(c)
	})
}

// saw records what the runtime did.
func (c *tc) saw(format string, args ...any) {
	c.Helper()
	msg := fmt.Sprintf(format, args...)
	c.behaviour = append(c.behaviour, msg)
	c.Log("saw: " + msg)
}

func (c *tc) note(msg string) {
	if c.reason == "" {
		c.reason = msg
	}
}

func (c *tc) fatalf(format string, args ...any) {
	c.Helper()
	msg := fmt.Sprintf(format, args...)
	c.unclaimed(msg)
	c.note(msg)
	c.Fatal(msg)
}

func (c *tc) errorf(format string, args ...any) {
	c.Helper()
	msg := fmt.Sprintf(format, args...)
	c.unclaimed(msg)
	c.note(msg)
	c.Error(msg)
}

// unclaimed ends the case, not claimed, when msg is its first failure and
// the one --mode does not claim (claims.Claim's Failure); any other
// failure fails it.
func (c *tc) unclaimed(msg string) {
	c.Helper()
	if c.reason != "" || !c.claim.Takes(msg) {
		return
	}
	c.notClaimed = c.claim.Said(msg)
	c.Log("not claimed: " + msg)
	c.SkipNow()
}

func (c *tc) skipf(format string, args ...any) {
	c.Helper()
	msg := fmt.Sprintf(format, args...)
	c.note(msg)
	c.Skip(msg)
}

// cleanupCtx is for cleanups, which run after the case's context ended.
func cleanupCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), time.Minute)
}

func randHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

var (
	markerBase = 100000 + mrand.IntN(800000)
	markerSeq  atomic.Int32
)

// marker returns a command line no other process has ("sleep 4xxxxx"), so a
// process list shows whose process it sees.
func marker() []string {
	return []string{"sleep", strconv.Itoa(markerBase + int(markerSeq.Add(1)))}
}

func sees(ps string, cmd []string) bool { return strings.Contains(ps, strings.Join(cmd, " ")) }

type pod struct {
	id  string
	cfg *runtimeapi.PodSandboxConfig
	// userns is the pod's userns_options (hostUsers: false), which every
	// container of the pod gets too, as kubelet sends them; nil: the host's.
	userns *runtimeapi.UserNamespace
}

// newPod runs a pod whose containers get their own PID namespace unless
// they ask otherwise (NamespaceMode CONTAINER, Kubernetes' default), in the
// network mode of --pod-network-mode. It is stopped and removed when the
// case ends.
func (c *tc) newPod(name string, edit ...func(*runtimeapi.PodSandboxConfig)) *pod {
	c.Helper()
	uid := randHex(8)
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name + "-" + uid[:6], Uid: uid, Namespace: "nstarget-conformance"},
		Labels:   map[string]string{"io.cri-nstarget.conformance": "true"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: suite.network, Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_POD},
		}},
	}
	for _, e := range edit {
		e(cfg)
	}
	resp, err := suite.rt.RunPodSandbox(c.ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		c.fatalf("setup: RunPodSandbox %s: %v", name, err)
	}
	p := &pod{id: resp.GetPodSandboxId(), cfg: cfg, userns: cfg.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions()}
	c.Cleanup(func() {
		ctx, cancel := cleanupCtx()
		defer cancel()
		// kubelet retries a failed StopPodSandbox; so does the suite, a few
		// times (containerd 2.1 sometimes answers "ttrpc: closed" when a
		// container died with the PID namespace it shared).
		for attempt := 1; ; attempt++ {
			_, err := suite.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.id})
			if err == nil {
				break
			}
			if attempt == 3 {
				c.errorf("cleanup: StopPodSandbox %s (%d attempts): %v", p.id, attempt, err)
				break
			}
			c.Logf("cleanup: StopPodSandbox %s (attempt %d, retried): %v", p.id, attempt, err)
			time.Sleep(time.Second)
		}
		if _, err := suite.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.id}); err != nil {
			c.errorf("cleanup: RemovePodSandbox %s: %v", p.id, err)
		}
	})
	return p
}

// ctr describes a container of the suite.
type ctr struct {
	name       string
	attempt    uint32
	cmd        []string
	ns         *runtimeapi.NamespaceOption
	caps       []string
	privileged bool
}

func (c *tc) create(p *pod, s ctr) (string, error) {
	if s.ns == nil {
		s.ns = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}
	}
	if p.userns != nil && s.ns.UsernsOptions == nil {
		// A copy: s.ns may be shared (own, pidT's callers).
		s.ns = &runtimeapi.NamespaceOption{Network: s.ns.Network, Pid: s.ns.Pid, Ipc: s.ns.Ipc, TargetId: s.ns.TargetId, UsernsOptions: p.userns}
	}
	if s.ns.Network == runtimeapi.NamespaceMode_POD && suite.network == runtimeapi.NamespaceMode_NODE {
		s.ns.Network = runtimeapi.NamespaceMode_NODE
	}
	if len(s.cmd) == 0 {
		s.cmd = marker()
	}
	sc := &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: s.ns, Privileged: s.privileged}
	if len(s.caps) > 0 {
		sc.Capabilities = &runtimeapi.Capability{AddCapabilities: s.caps}
	}
	resp, err := suite.rt.CreateContainer(c.ctx, &runtimeapi.CreateContainerRequest{
		PodSandboxId:  p.id,
		SandboxConfig: p.cfg,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: s.name, Attempt: s.attempt},
			Image:    &runtimeapi.ImageSpec{Image: *testImage},
			Command:  s.cmd,
			Linux:    &runtimeapi.LinuxContainerConfig{SecurityContext: sc},
		},
	})
	return resp.GetContainerId(), err
}

func (c *tc) mustCreate(p *pod, s ctr) string {
	c.Helper()
	id, err := c.create(p, s)
	if err != nil {
		c.fatalf("CreateContainer %s: %v", s.name, err)
	}
	return id
}

func (c *tc) start(id string) error {
	_, err := suite.rt.StartContainer(c.ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
	return err
}

func (c *tc) mustStart(name, id string) {
	c.Helper()
	if err := c.start(id); err != nil {
		c.fatalf("StartContainer %s: %v", name, err)
	}
}

// run creates and starts a container; setup failures are the case's failure.
func (c *tc) run(p *pod, s ctr) string {
	c.Helper()
	id := c.mustCreate(p, s)
	c.mustStart(s.name, id)
	return id
}

// stop stops a container at once (SIGKILL: sleep as PID 1 ignores SIGTERM)
// and waits until the runtime reports it exited.
func (c *tc) stop(name, id string) {
	c.Helper()
	if _, err := suite.rt.StopContainer(c.ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0}); err != nil {
		c.fatalf("StopContainer %s: %v", name, err)
	}
	c.eventually(name+" to exit", func() error {
		st, err := suite.rt.ContainerStatus(c.ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id})
		if err != nil {
			return err
		}
		if s := st.GetStatus().GetState(); s != runtimeapi.ContainerState_CONTAINER_EXITED {
			return fmt.Errorf("state %v", s)
		}
		return nil
	})
}

// exec runs cmd in container id and returns its trimmed stdout; a non-zero
// exit is an error.
func (c *tc) exec(id string, cmd ...string) (string, error) {
	resp, err := suite.rt.ExecSync(c.ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 30})
	if err != nil {
		return "", fmt.Errorf("exec %q: %w", cmd, err)
	}
	if resp.GetExitCode() != 0 {
		return "", fmt.Errorf("exec %q: exit %d: %s", cmd, resp.GetExitCode(), strings.TrimSpace(string(resp.GetStderr())))
	}
	return strings.TrimSpace(string(resp.GetStdout())), nil
}

func (c *tc) mustExec(what, id string, cmd ...string) string {
	c.Helper()
	out, err := c.exec(id, cmd...)
	if err != nil {
		c.fatalf("%s: %v", what, err)
	}
	return out
}

// ns is the namespace link ("pid:[4026532...]") of a new process in id.
func (c *tc) ns(name, id, kind string) string {
	c.Helper()
	return c.mustExec("read the "+kind+" namespace of "+name, id, "readlink", "/proc/self/ns/"+kind)
}

// initNS is the namespace link of id's PID 1 (its main process, when the
// container has its own PID namespace), as seen from inside id.
func (c *tc) initNS(name, id, kind string) string {
	c.Helper()
	return c.mustExec("read the "+kind+" namespace of "+name+"'s PID 1", id, "readlink", "/proc/1/ns/"+kind)
}

// procs lists the processes container id sees.
func (c *tc) procs(name, id string) string {
	c.Helper()
	return c.mustExec("list the processes "+name+" sees", id, "ps", "-o", "pid,args")
}

// podNS are the pod's shared namespaces, read from inside a reference
// container that asks for NamespaceMode POD.
type podNS struct{ ref, pid, ipc string }

func (c *tc) podNamespaces(p *pod) podNS {
	c.Helper()
	ref := c.run(p, ctr{name: "ref", ns: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_POD, Ipc: runtimeapi.NamespaceMode_POD}})
	return podNS{ref: ref, pid: c.ns("ref", ref, "pid"), ipc: c.ns("ref", ref, "ipc")}
}

// containersIn lists the ids of the containers of pod p.
func (c *tc) containersIn(p *pod) []string {
	c.Helper()
	resp, err := suite.rt.ListContainers(c.ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: p.id}})
	if err != nil {
		c.fatalf("ListContainers of pod %s: %v", p.id, err)
	}
	var ids []string
	for _, ct := range resp.GetContainers() {
		ids = append(ids, ct.GetId())
	}
	return ids
}

// eventually polls f until it returns nil, for up to 30 s.
func (c *tc) eventually(what string, f func() error) {
	c.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err = f(); err == nil {
			return
		}
	}
	c.fatalf("timed out waiting for %s: %v", what, err)
}

// code is err's gRPC code, spelled as in the CRI docs.
func code(err error) codes.Code { return status.Code(err) }

// cleanRefusal reports whether err is one of the codes a refusal may have;
// Unknown and Internal say the runtime did not classify the problem.
func cleanRefusal(err error, allowed ...codes.Code) bool {
	for _, a := range allowed {
		if code(err) == a {
			return true
		}
	}
	return false
}

func short(err error) string {
	if err == nil {
		return "<nil>"
	}
	msg := status.Convert(err).Message()
	if len(msg) > 200 {
		msg = msg[:200] + "..."
	}
	return code(err).String() + ": " + msg
}

var errNotFound = errors.New("not found")

// hostPidOf finds, in a process list from a host-PID container, the PID of
// the process whose command line is cmd.
func hostPidOf(ps string, cmd []string) (int, error) {
	want := strings.Join(cmd, " ")
	for _, line := range strings.Split(ps, "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 && strings.Join(f[1:], " ") == want {
			return strconv.Atoi(f[0])
		}
	}
	return 0, fmt.Errorf("process %q: %w", want, errNotFound)
}

// pinnedByPlugin checks, with --mode plugin, that containerd's spec for
// container id (name) names a PID namespace other than containerd's own
// /proc/<pid>/ns/pid: the plugin's pin, its answer to the create. Without
// it, a plugin that was never attached would pass what containerd passes
// alone.
func (c *tc) pinnedByPlugin(name, id string) {
	c.Helper()
	if *nodeMode != claims.ModePlugin {
		return
	}
	st, err := suite.rt.ContainerStatus(c.ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		c.errorf("ContainerStatus (verbose) of %s: %s", name, short(err))
		return
	}
	path, err := claims.SpecNamespace(st.GetInfo(), "pid")
	if err != nil {
		c.errorf("containerd's spec for %s: %v", name, err)
		return
	}
	c.saw("containerd's spec for %s names the PID namespace %s", name, path)
	if !claims.Pinned(path) {
		c.errorf("containerd's spec for %s names %q, not the plugin's pin: cri-nstarget's plugin did not answer its create (is it attached to containerd's NRI socket?)", name, path)
	}
}
