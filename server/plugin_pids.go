package server

import (
	"context"
	"fmt"
	"sync"

	nriapi "github.com/containerd/nri/pkg/api"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// procs maps, in the plugin mode, the pid containerd writes into a TARGET
// container's spec back to the target: the running containers and their
// init's pid, as NRI tells them (Synchronize, PostStartContainer; a
// RemoveContainer drops one), asked of containerd for a pid NRI has not
// told of (find). What it finds is a candidate only: the create resolves
// it as the proxy resolves a target_id (containerd's pid for it, its
// namespaces opened through a pidfd, containerd asked again), so a stale
// entry (a container that exited, its pid reused) is never pinned.
type procs struct {
	cri   backendCRI // containerd's CRI: the pod's running containers
	tasks taskLookup // containerd's word on their pids

	// mu guards byID; a leaf, never held across a call to containerd.
	mu   sync.Mutex
	byID map[string]proc
}

// proc is one container's pod sandbox and its init's pid.
type proc struct {
	sandbox string
	pid     uint32
}

func newProcs(cri backendCRI, tasks taskLookup) *procs {
	return &procs{cri: cri, tasks: tasks, byID: map[string]proc{}}
}

// reset learns the containers containerd has (Synchronize), those with a
// process.
func (p *procs) reset(ctrs []*nriapi.Container) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byID = map[string]proc{}
	for _, c := range ctrs {
		if c.GetPid() != 0 && c.GetState() == nriapi.ContainerState_CONTAINER_RUNNING {
			p.byID[c.GetId()] = proc{sandbox: c.GetPodSandboxId(), pid: c.GetPid()}
		}
	}
}

// started learns container id of sandbox, started with pid: a pid is one
// process's at a time, so whatever held it before is forgotten.
func (p *procs) started(id, sandbox string, pid uint32) {
	if pid == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for other, pr := range p.byID {
		if pr.pid == pid {
			delete(p.byID, other)
		}
	}
	p.byID[id] = proc{sandbox: sandbox, pid: pid}
}

func (p *procs) removed(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.byID, id)
}

func (p *procs) podRemoved(sandbox string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, pr := range p.byID {
		if pr.sandbox == sandbox {
			delete(p.byID, id)
		}
	}
}

// known is the container of sandbox that NRI said runs with pid; "" for
// none (another pod's container is none).
func (p *procs) known(sandbox string, pid uint32) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, pr := range p.byID {
		if pr.pid == pid && pr.sandbox == sandbox {
			return id
		}
	}
	return ""
}

// find is the container of sandbox whose init has pid: the one NRI told
// of, else the one of the pod's running containers whose task containerd
// says has pid (a start whose PostStartContainer has not come yet); ""
// when none of the pod's has.
func (p *procs) find(ctx context.Context, sandbox string, pid uint32) (string, error) {
	if id := p.known(sandbox, pid); id != "" {
		return id, nil
	}
	resp, err := p.cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		PodSandboxId: sandbox, State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return "", fmt.Errorf("list the running containers of pod sandbox %s: %w", sandbox, err)
	}
	for _, c := range resp.GetContainers() {
		if c.GetPodSandboxId() != sandbox {
			continue
		}
		if got, err := p.tasks.TaskPID(ctx, c.GetId()); err == nil && got == pid {
			p.started(c.GetId(), sandbox, pid)
			return c.GetId(), nil
		}
	}
	return "", nil
}
