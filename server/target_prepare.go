package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// target is the target container of one TARGET create, as prepare found
// it: resolved through the backend, and its process's namespaces opened
// through a pidfd, or why they could not be (failed, a fallback). It is
// opened by prepare and closed by the create (preparation.close), once
// nothing will pin from it; in between it is only read.
type target struct {
	id      string // the full id ("" when the request asks for no target: unknown modes only)
	name    string // its CRI name ("" if not known)
	sandbox string // its pod sandbox's full id, the new container's too
	pid     uint32 // the process its namespaces were opened through
	// handles are its open namespaces (pid, ipc), shm its /dev/shm (opened
	// with an ipc namespace; nil when it has none), until close.
	handles []*namespaces.Handle
	shm     *namespaces.Handle
	failed  *failure // why its namespaces were not opened; nil if they were
	// confirm waits (once; either path may ask first) for containerd to
	// confirm pid as the target's, after the namespaces were opened.
	confirm func() error
}

func (tg *target) close() {
	for _, h := range tg.handles {
		h.Close()
	}
	if tg.shm != nil {
		tg.shm.Close()
	}
}

// preparation is prepare running: it resolves the target and opens its
// namespaces in the background, while the create goes on, until whoever
// first needs the target waits for it.
type preparation struct {
	req  criwire.Create // the request it prepares for
	p    *plan
	done chan struct{}
	tg   *target // set before done is closed, then only read
	err  error   // the caller's error (NotFound, FailedPrecondition, ...)
}

// prepare starts resolving the target of a request (p) and opening its
// namespaces; the pid they were opened through is then confirmed with
// containerd in the background, on lctx (the create's late steps). Errors
// are the caller's (InvalidArgument, NotFound, FailedPrecondition);
// whatever else keeps targeting from being honoured becomes the target's
// failure, a fallback.
func (t *targeter) prepare(ctx, lctx context.Context, req criwire.Create, p *plan) *preparation {
	pr := &preparation{req: req, p: p, done: make(chan struct{})}
	if len(p.kinds) == 0 {
		// unknown modes only: no target to resolve
		pr.tg = &target{confirm: func() error { return nil }}
		close(pr.done)
		return pr
	}
	go func() {
		defer close(pr.done)
		pr.tg, pr.err = t.resolve(ctx, lctx, req, p)
	}()
	return pr
}

// wait waits for the preparation, and answers the target or the error.
func (pr *preparation) wait() (*target, error) {
	<-pr.done
	return pr.tg, pr.err
}

// close closes what the preparation opened, once it is done.
func (pr *preparation) close() {
	if tg, _ := pr.wait(); tg != nil {
		tg.close()
	}
}

// resolve is the preparation itself.
func (t *targeter) resolve(ctx, lctx context.Context, req criwire.Create, p *plan) (*target, error) {
	// The target's pid is asked for while the target is resolved: target_id
	// is the full id but for a prefix, which means asking again.
	early := make(chan pidAnswer, 1)
	go func() {
		pid, err := t.tasks.TaskPID(ctx, p.target)
		early <- pidAnswer{pid, err}
	}()
	ctr, err := t.resolveTarget(ctx, req, p.target)
	if err != nil {
		return nil, err
	}
	tg := &target{id: ctr.GetId(), name: ctr.GetMetadata().GetName(), sandbox: ctr.GetPodSandboxId(), confirm: func() error { return nil }}
	pid, f := t.targetPID(ctx, ctr, p.target, early)
	if f == nil {
		f = tg.open(pid, p.kinds, t.openNS)
	}
	if f != nil {
		tg.failed = f
		return tg, nil
	}
	tg.confirm = t.confirmation(lctx, tg.id, pid)
	return tg, nil
}

type pidAnswer struct {
	pid uint32
	err error
}

// targetPID is the running target ctr's pid: early's answer when asked for
// the id the target resolved to (asked), else asked again. A target that
// is not running, or whose pid cannot be had, is a failure.
func (t *targeter) targetPID(ctx context.Context, ctr *runtimeapi.Container, asked string, early <-chan pidAnswer) (uint32, *failure) {
	if st := ctr.GetState(); st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return 0, &failure{why: reasonTargetNotRunning, code: codes.FailedPrecondition, reason: fmt.Sprintf("target is %s, not running", st)}
	}
	a := <-early
	if ctr.GetId() != asked {
		a.pid, a.err = t.tasks.TaskPID(ctx, ctr.GetId())
	}
	if a.err == nil {
		return a.pid, nil
	}
	if why := whyNoPID(a.err); why == reasonTargetNotRunning {
		// containerd's metadata knows the container, but it has no
		// running task: it exited (or never started). Said without ids:
		// strict mode's refusal, which the kubelet shows, says it too.
		var st taskStatusError
		if errors.As(a.err, &st) {
			return 0, &failure{why: why, code: codes.FailedPrecondition, reason: "target is not running: containerd's task for it is " + st.status.String()}
		}
		return 0, &failure{why: why, code: codes.FailedPrecondition, reason: "target is not running: containerd has no task for it (it exited, or never started)"}
	}
	return 0, &failure{why: whyNoPID(a.err), code: codeOf(a.err), reason: fmt.Sprintf("find the target's process: %v", a.err)}
}

// open opens kinds of the namespaces of the target's process pid. The pid
// is confirmed (confirmation) after they were opened. IPC means the
// target's /dev/shm too: it is opened in the same pidfd-checked step, so it
// is the target's for the same reasons.
func (tg *target) open(pid uint32, kinds []namespaces.Kind, openNS func(int, []namespaces.Kind) ([]*namespaces.Handle, error)) *failure {
	if slices.Contains(kinds, namespaces.IPC) {
		kinds = append(slices.Clip(kinds), namespaces.Shm)
	}
	hs, err := openNS(int(pid), kinds)
	if err != nil {
		return &failure{why: whyNoNamespace(err), code: codeOf(err), reason: fmt.Sprintf("open the target's namespaces: %v", err)}
	}
	tg.pid = pid
	for _, h := range hs {
		if h.Kind == namespaces.Shm {
			tg.shm = h
			continue
		}
		tg.handles = append(tg.handles, h)
	}
	return nil
}

// confirmation confirms with containerd, in the background, that pid, the
// process the target's namespaces were opened through, is still the
// target's (id): nothing joins them before CreateContainer answers, and the
// answer waits for it. The function it returns waits for the confirmation.
func (t *targeter) confirmation(ctx context.Context, id string, pid uint32) func() error {
	confirmed := make(chan error, 1)
	go func() { confirmed <- t.confirmPID(ctx, id, pid) }()
	return sync.OnceValue(func() error { return <-confirmed })
}

// confirmPID asks containerd again for the target's pid, after its
// namespaces were opened through pid (namespaces.Open): the same pid means
// the process opened was the target's.
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
	ctr, err := t.findTarget(ctx, name, id)
	if err != nil {
		return nil, err
	}
	if ctr == nil {
		return nil, notFoundf("container %q in pod sandbox %q: target container %q not found", name, sandbox, id)
	}
	same, err := t.samePod(ctx, sandbox, ctr.GetPodSandboxId())
	if err != nil {
		return nil, fmt.Errorf("container %q: resolve pod sandbox %q: %w", name, sandbox, err)
	}
	if !same {
		return nil, preconditionf("container %q in pod sandbox %q: target container %q belongs to pod sandbox %q; a container can only target a container of its own pod",
			name, sandbox, ctr.GetId(), ctr.GetPodSandboxId())
	}
	return ctr, nil
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
