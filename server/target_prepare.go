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
	handler string // the pod's runtime handler ("" if not known)
	pid     uint32 // the process its namespaces were opened through
	// handles are its open namespaces (pid, ipc), shm its /dev/shm (opened
	// with an ipc namespace; nil when it has none), until close.
	handles []*namespaces.Handle
	shm     *namespaces.Handle
	failed  *failure // why its namespaces were not opened; nil if they were
	// confirm waits (once; either path may ask first) for pid to be
	// confirmed as the target's, after the namespaces were opened: by
	// containerd's word, or already by /proc (openConfirmed).
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
//
// The proxy's preparation runs beside the forward to containerd. The
// plugin mode's (p.found: the target as NRI told it, nothing to ask
// containerd for) runs at once, on the caller's goroutine, inside
// containerd's create: all it would run beside is the intent record's
// write, shorter than the wait for another goroutine to be scheduled on a
// busy node (bench-plugin, timed: its namespaces were opened from 164 us
// after the event on another goroutine, from 30 us on this one).
func (t *targeter) prepare(ctx, lctx context.Context, req criwire.Create, p *plan) *preparation {
	pr := &preparation{req: req, p: p, done: make(chan struct{})}
	if len(p.kinds) == 0 {
		// unknown modes only: no target to resolve
		pr.tg = &target{confirm: func() error { return nil }}
		close(pr.done)
		return pr
	}
	if p.found != nil {
		defer close(pr.done)
		pr.tg, pr.err = t.resolve(ctx, lctx, req, p)
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

// resolve is the preparation itself: the target found (findTarget), in the
// request's pod (req), with its pid; the namespaces the plan asks for (p)
// opened through that pid, which is then confirmed, by /proc at once or by
// containerd in the background (openConfirmed).
func (t *targeter) resolve(ctx, lctx context.Context, req criwire.Create, p *plan) (*target, error) {
	name, sandbox := req.Name, req.SandboxID
	c, err := t.targetOf(ctx, name, p)
	switch {
	case err != nil:
		return nil, err
	case c.matches == 0:
		return nil, notFoundf("container %q in pod sandbox %q: target container %q not found", name, sandbox, p.target)
	case c.matches > 1:
		return nil, invalidf("container %q: target_id %q matches %d containers; give the full id", name, p.target, c.matches)
	}
	ctr := c.ctr
	if same, err := t.samePod(ctx, sandbox, ctr.GetPodSandboxId()); err != nil {
		return nil, fmt.Errorf("container %q: resolve pod sandbox %q: %w", name, sandbox, err)
	} else if !same {
		return nil, preconditionf("container %q in pod sandbox %q: target container %q belongs to pod sandbox %q; a container can only target a container of its own pod",
			name, sandbox, ctr.GetId(), ctr.GetPodSandboxId())
	}
	tg := &target{id: ctr.GetId(), name: ctr.GetMetadata().GetName(), sandbox: ctr.GetPodSandboxId(), confirm: func() error { return nil }}
	if tg.failed = t.cannotJoin(ctx, tg); tg.failed != nil {
		return tg, nil
	}
	if tg.failed = c.failure(); tg.failed != nil {
		return tg, nil
	}
	// IPC means the target's /dev/shm too, opened in the same
	// pidfd-checked step, so that it is the target's for the same reasons.
	kinds := p.kinds
	if slices.Contains(kinds, namespaces.IPC) {
		kinds = append(slices.Clip(kinds), namespaces.Shm)
	}
	hs, confirm, err := t.openConfirmed(lctx, tg.id, c, kinds)
	if err != nil {
		tg.failed = &failure{why: whyNoNamespace(err), code: codeOf(err), reason: fmt.Sprintf("open the target's namespaces: %v", err)}
		return tg, nil
	}
	tg.pid = c.pid
	for _, h := range hs {
		if h.Kind == namespaces.Shm {
			tg.shm = h
			continue
		}
		tg.handles = append(tg.handles, h)
	}
	tg.confirm = confirm
	return tg, nil
}

// cannotJoin learns the runtime handler of tg's pod, and whether its
// runtime cannot join namespace paths: then nothing is pointed at a pin
// (a fallback, before anything is made; strict: refused).
func (t *targeter) cannotJoin(ctx context.Context, tg *target) *failure {
	h, ok := t.handlers.of(ctx, tg.sandbox)
	if !ok {
		return nil
	}
	tg.handler = h
	if why := t.handlers.cannot(h); why != "" {
		return &failure{why: reasonRuntimeCannotJoin, code: codes.FailedPrecondition, reason: why}
	}
	return nil
}

// found is the target as findTarget found it: how many containers the id
// matched (more than one: a prefix of several), the one it matched, and its
// task's pid, or why there is none (pidErr).
type found struct {
	matches int
	ctr     *runtimeapi.Container
	pid     uint32
	pidErr  error
	// cgroups is the container's cgroups path as NRI told it (the plugin
	// mode), "" when not known: then containerd confirms the pid.
	cgroups string
}

// failure is why the namespaces of the target found cannot be opened: it
// is not running, or its pid cannot be had; nil when they can be.
func (c found) failure() *failure {
	if st := c.ctr.GetState(); st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return &failure{why: reasonTargetNotRunning, code: codes.FailedPrecondition, reason: fmt.Sprintf("target is %s, not running", st)}
	}
	if c.pidErr == nil {
		return nil
	}
	if why := whyNoPID(c.pidErr); why == reasonTargetNotRunning {
		// containerd's metadata knows the container, but it has no
		// running task: it exited (or never started). Said without ids:
		// strict mode's refusal, which the kubelet shows, says it too.
		var st taskStatusError
		if errors.As(c.pidErr, &st) {
			return &failure{why: why, code: codes.FailedPrecondition, reason: "target is not running: containerd's task for it is " + st.status.String()}
		}
		return &failure{why: why, code: codes.FailedPrecondition, reason: "target is not running: containerd has no task for it (it exited, or never started)"}
	}
	return &failure{why: whyNoPID(c.pidErr), code: codeOf(c.pidErr), reason: fmt.Sprintf("find the target's process: %v", c.pidErr)}
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
		return &pidChangedError{was: pid, now: again}
	}
	return nil
}

// pidChangedError: containerd's pid for the target is another (now) than
// the one its namespaces were opened through (was).
type pidChangedError struct{ was, now uint32 }

func (e *pidChangedError) Error() string {
	return fmt.Sprintf("verify pid %d: target's task pid changed from %d to %d", e.was, e.was, e.now)
}

// targetOf is the plan's target as containerd's word has it: what NRI told
// of it, in the plugin mode (p.found), else looked up (findTarget).
func (t *targeter) targetOf(ctx context.Context, name string, p *plan) (found, error) {
	if p.found != nil {
		return *p.found, nil
	}
	return t.findTarget(ctx, name, p.target)
}

// findTarget looks the target (id) up, with its task's pid. A full id is
// looked up in containerd's own metadata, its task read at the same time:
// two reads where the CRI's ListContainers costs more, and whether it runs
// is the task's to say. An id prefix, or containerd's API failing, goes
// through the backend's CRI, and the pid is then asked for the full id.
func (t *targeter) findTarget(ctx context.Context, name, id string) (found, error) {
	if t.lookup != nil && isFullID(id) {
		c, err := t.lookup.CRIContainer(ctx, id)
		switch {
		case errors.Is(err, errNotCRIContainer):
			return found{}, nil
		case err == nil:
			// RUNNING as far as the CRI goes: the task's state decides
			return found{matches: 1, ctr: &runtimeapi.Container{Id: id, PodSandboxId: c.Sandbox, Metadata: &runtimeapi.ContainerMetadata{Name: c.Name},
				State: runtimeapi.ContainerState_CONTAINER_RUNNING}, pid: c.PID, pidErr: c.PIDErr}, nil
		}
		t.log.WithError(err).WithField("target", id).Debug("resolve the target through containerd's API; through its CRI instead")
	}
	resp, err := t.cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: id}})
	if err != nil {
		return found{}, fmt.Errorf("container %q: resolve target %q: %w", name, id, err)
	}
	cs := resp.GetContainers()
	if len(cs) != 1 {
		return found{matches: len(cs)}, nil
	}
	c := found{matches: 1, ctr: cs[0]}
	if c.ctr.GetState() == runtimeapi.ContainerState_CONTAINER_RUNNING {
		c.pid, c.pidErr = t.tasks.TaskPID(ctx, c.ctr.GetId())
	}
	return c, nil
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
