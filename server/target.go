package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// What the targeting needs from outside, small so unit tests can fake it.
type (
	// backendCRI is the typed part of the backend's CRI the shim calls itself.
	backendCRI interface {
		ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
		ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error)
		RemoveContainer(ctx context.Context, in *runtimeapi.RemoveContainerRequest, opts ...grpc.CallOption) (*runtimeapi.RemoveContainerResponse, error)
		Version(ctx context.Context, in *runtimeapi.VersionRequest, opts ...grpc.CallOption) (*runtimeapi.VersionResponse, error)
	}
	taskLookup interface {
		TaskPID(ctx context.Context, id string) (uint32, error)
	}
	// criContainers finds a CRI container by its full id in containerd's
	// own metadata: its pod sandbox and name, or errNotCRIContainer.
	criContainers interface {
		CRIContainer(ctx context.Context, id string) (criContainer, error)
	}
	specEditor interface {
		EditSpec(ctx context.Context, id string, edit func(*specs.Spec) ([]oci.Opt, error)) error
		Spec(ctx context.Context, id string) (*specs.Spec, error)
	}
	pinStore interface {
		Paths(id string, hs []*namespaces.Handle) (map[namespaces.Kind]string, error)
		Hold(id string, hs []*namespaces.Handle) error
		Add(id string, h *namespaces.Handle) (string, error)
		Path(id string, kind namespaces.Kind) (string, bool)
		Release(id string) error
		IDs() ([]string, error)
	}
)

// targeter is what the shim does besides forwarding: the hooks of the
// intercepted methods (container_*.go, sandbox_remove.go), which see a
// request as bytes and a function that forwards bytes; nothing here knows
// how calls arrive. A create goes plan (target_plan.go), resolve (prepare,
// here), decide (target_decide.go) and render (target_render.go), each
// step's policy a function of plain values. What has state or a lifetime of
// its own is elsewhere: the pins (package pins), the intent records
// (package intents) and crash recovery (reconciler), the NRI connection
// (package nriplugin, behind nriAdapter), and the log and metrics
// (reporter). Every field is set by newServer (nri, removals, lookup and
// nriOnly by useNRI and New) before the first call, and never changes after.
type targeter struct {
	cri     backendCRI
	tasks   taskLookup
	specs   specEditor
	pins    pinStore
	openNS  func(pid int, kinds []namespaces.Kind) ([]*namespaces.Handle, error)
	hasInit func(path string) (bool, error)
	canJoin func(h *namespaces.Handle, userns string) (bool, error)
	lookup  criContainers // nil: targets are resolved through the CRI only
	strict  bool
	log     *logrus.Entry
	report  reporter
	recon   *reconciler

	nri      nriAdapter  // nil: the Update path only
	removals removalGate // nil: RemovePodSandbox waits for nothing
	nriOnly  bool        // refuse TARGET creates while NRI is not usable
}

// prepare resolves the target and opens its namespaces. Errors are the
// caller's (InvalidArgument, NotFound, FailedPrecondition); whatever keeps
// targeting from being honoured otherwise becomes a fallback in the outcome.
func (t *targeter) prepare(ctx context.Context, req criwire.Create, p *plan) (*outcome, error) {
	o := &outcome{name: req.Name, rec: oci.Record{Target: p.target, Pod: podOf(req.Pod), Namespaces: map[string]oci.NamespaceRecord{}}}
	for _, u := range p.unknown {
		o.fallBack(u.kind, "create", reasonUnknownMode, codes.InvalidArgument,
			fmt.Sprintf("unknown NamespaceMode %d for the %s namespace (known: POD, CONTAINER, NODE, TARGET)", u.mode, u.kind))
	}
	if len(p.kinds) == 0 {
		return o, nil
	}
	// The target's pid is asked for while the target is resolved: target_id
	// is the full id but for a prefix, which means asking again.
	early := make(chan pidAnswer, 1)
	go func() {
		pid, err := t.tasks.TaskPID(ctx, p.target)
		early <- pidAnswer{pid, err}
	}()
	tc, err := t.resolveTarget(ctx, req, p.target)
	if err != nil {
		return nil, err
	}
	o.rec.Target, o.rec.TargetName, o.sandbox = tc.GetId(), tc.GetMetadata().GetName(), tc.GetPodSandboxId()
	pid, f := t.targetPID(ctx, tc, p.target, early)
	if f == nil {
		f = o.open(pid, p.kinds, t.openNS)
	}
	if f != nil {
		for _, k := range p.kinds {
			o.fallBack(string(k), "create", f.why, f.code, f.reason)
		}
	}
	return o, nil
}

// podOf is the pod a request's sandbox_config names, for the record; nil
// when it names none.
func podOf(p criwire.Pod) *oci.Pod {
	if p == (criwire.Pod{}) {
		return nil
	}
	return &oci.Pod{Namespace: p.Namespace, Name: p.Name, UID: p.UID}
}

type pidAnswer struct {
	pid uint32
	err error
}

// targetPID is the running target tc's pid: early's answer when asked for
// the id the target resolved to (asked), else asked again. A target that
// is not running, or whose pid cannot be had, is a failure.
func (t *targeter) targetPID(ctx context.Context, tc *runtimeapi.Container, asked string, early <-chan pidAnswer) (uint32, *failure) {
	if st := tc.GetState(); st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return 0, &failure{why: reasonTargetNotRunning, code: codes.FailedPrecondition, reason: fmt.Sprintf("target is %s, not running", st)}
	}
	a := <-early
	if tc.GetId() != asked {
		a.pid, a.err = t.tasks.TaskPID(ctx, tc.GetId())
	}
	if a.err == nil {
		return a.pid, nil
	}
	if why := whyNoPID(a.err); why == reasonTargetNotRunning {
		// containerd's metadata knows the container, but it has no
		// running task: it exited (or never started).
		return 0, &failure{why: why, code: codes.FailedPrecondition, reason: fmt.Sprintf("target is not running: containerd has no running task for it (%v)", a.err)}
	}
	return 0, &failure{why: whyNoPID(a.err), code: codeOf(a.err), reason: fmt.Sprintf("find the target's process: %v", a.err)}
}

// open opens kinds of the namespaces of the target's process pid into o.
// The pid is confirmed (confirmPID) while the backend creates the
// container, after the namespaces were opened. IPC means
// the target's /dev/shm too: it is opened in the same pidfd-checked step,
// so it is the target's for the same reasons.
func (o *outcome) open(pid uint32, kinds []namespaces.Kind, openNS func(int, []namespaces.Kind) ([]*namespaces.Handle, error)) *failure {
	if slices.Contains(kinds, namespaces.IPC) {
		kinds = append(slices.Clip(kinds), namespaces.Shm)
	}
	hs, err := openNS(int(pid), kinds)
	if err != nil {
		return &failure{why: whyNoNamespace(err), code: codeOf(err), reason: fmt.Sprintf("open the target's namespaces: %v", err)}
	}
	o.pid = pid
	for _, h := range hs {
		if h.Kind == namespaces.Shm {
			o.shm = h
			continue
		}
		o.handles = append(o.handles, h)
		o.rec.Namespaces[string(h.Kind)] = oci.NamespaceRecord{Result: oci.Targeted, Stage: "create", Inode: h.ID.Ino}
	}
	return nil
}

// confirmPID asks containerd again for the target's pid, after its
// namespaces were opened through pid (namespaces.Open's last step): the same
// pid means the process opened was the target's.
func (t *targeter) confirmPID(ctx context.Context, target string, pid uint32) error {
	again, err := t.tasks.TaskPID(ctx, target)
	if err != nil {
		return fmt.Errorf("verify pid %d: %w", pid, err)
	}
	if again != pid {
		return fmt.Errorf("verify pid %d: target's task pid changed from %d to %d", pid, pid, again)
	}
	return nil
}

// resolveTarget finds the target, also resolving an unambiguous id prefix
// to the full id, and checks that it is in the request's pod.
func (t *targeter) resolveTarget(ctx context.Context, req criwire.Create, id string) (*runtimeapi.Container, error) {
	name, sandbox := req.Name, req.SandboxID
	tc, err := t.findTarget(ctx, name, id)
	if err != nil {
		return nil, err
	}
	if tc == nil {
		return nil, notFoundf("container %q in pod sandbox %q: target container %q not found", name, sandbox, id)
	}
	same, err := t.samePod(ctx, sandbox, tc.GetPodSandboxId())
	if err != nil {
		return nil, fmt.Errorf("container %q: resolve pod sandbox %q: %w", name, sandbox, err)
	}
	if !same {
		return nil, preconditionf("container %q in pod sandbox %q: target container %q belongs to pod sandbox %q; a container can only target a container of its own pod",
			name, sandbox, tc.GetId(), tc.GetPodSandboxId())
	}
	return tc, nil
}

// findTarget looks the target up (nil: there is none). A full id is looked
// up in containerd's own metadata, one read where the CRI's ListContainers
// costs more; whether it runs is then the task's to say (TaskPID). An id
// prefix, or containerd's API failing, goes through the backend's CRI.
func (t *targeter) findTarget(ctx context.Context, name, id string) (*runtimeapi.Container, error) {
	if t.lookup != nil && isFullID(id) {
		c, err := t.lookup.CRIContainer(ctx, id)
		switch {
		case errors.Is(err, errNotCRIContainer):
			return nil, nil
		case err == nil:
			// RUNNING as far as the CRI goes: the task's state decides
			return &runtimeapi.Container{Id: id, PodSandboxId: c.Sandbox, Metadata: &runtimeapi.ContainerMetadata{Name: c.Name},
				State: runtimeapi.ContainerState_CONTAINER_RUNNING}, nil
		}
		t.log.WithError(err).WithField("target", id).Debug("resolve the target through containerd's API; through its CRI instead")
	}
	resp, err := t.cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: id}})
	if err != nil {
		return nil, fmt.Errorf("container %q: resolve target %q: %w", name, id, err)
	}
	switch cs := resp.GetContainers(); len(cs) {
	case 0:
		return nil, nil
	case 1:
		return cs[0], nil
	default:
		return nil, invalidf("container %q: target_id %q matches %d containers; give the full id", name, id, len(cs))
	}
}

// isFullID: 64 lowercase hex digits, the ids containerd's CRI gives.
func isFullID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// samePod tells whether the sandbox id a request gave (in full, or as a
// unique prefix the backend resolves) is the target's sandbox, targetPod.
func (t *targeter) samePod(ctx context.Context, sandbox, targetPod string) (bool, error) {
	switch {
	case sandbox == "":
		return false, nil
	case sandbox == targetPod:
		return true, nil
	case !strings.HasPrefix(targetPod, sandbox):
		return false, nil
	}
	resp, err := t.cri.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: sandbox}})
	if err != nil {
		return false, err
	}
	ps := resp.GetItems()
	return len(ps) == 1 && ps[0].GetId() == targetPod, nil
}

// codeOf picks the code for a failure to reach the target: Unavailable when
// containerd did not answer, FailedPrecondition otherwise.
func codeOf(err error) codes.Code {
	if status.Code(err) == codes.Unavailable || errors.Is(err, context.DeadlineExceeded) {
		return codes.Unavailable
	}
	return codes.FailedPrecondition
}
