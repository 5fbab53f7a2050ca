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
// told of (find). What it finds is containerd's word on the target, as the
// proxy's lookup of a target_id is, and no more: the create opens the
// target's namespaces through a pidfd of that pid and asks containerd
// again (the confirmation), so a stale entry (a container that exited, its
// pid reused) is never pinned. What NRI told needs no round trip to
// containerd while it waits for the answer.
type procs struct {
	cri   containerLister // containerd's CRI: the pod's running containers
	tasks taskLookup      // containerd's word on their pids

	// mu guards byID; a leaf, never held across a call to containerd.
	mu   sync.Mutex
	byID map[string]proc
}

// proc is one container's pod sandbox, name, init's pid, and cgroups path
// ("" if NRI told none).
type proc struct {
	sandbox string
	name    string
	pid     uint32
	cgroups string
}

// procOf is container c as NRI tells it.
func procOf(c *nriapi.Container) proc {
	return proc{sandbox: c.GetPodSandboxId(), name: c.GetName(), pid: c.GetPid(), cgroups: c.GetLinux().GetCgroupsPath()}
}

func newProcs(cri containerLister, tasks taskLookup) *procs {
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
			p.byID[c.GetId()] = procOf(c)
		}
	}
}

// started learns container id, started as pr: a pid is one process's at a
// time, so whatever held it before is forgotten.
func (p *procs) started(id string, pr proc) {
	if pr.pid == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for other, o := range p.byID {
		if o.pid == pr.pid {
			delete(p.byID, other)
		}
	}
	p.byID[id] = pr
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

// known is the container of sandbox that NRI said runs with pid (no
// match for none: another pod's container is none).
func (p *procs) known(sandbox string, pid uint32) found {
	p.mu.Lock()
	defer p.mu.Unlock()
	for id, pr := range p.byID {
		if pr.pid == pid && pr.sandbox == sandbox {
			return foundRunning(id, pr)
		}
	}
	return found{}
}

// foundRunning is container id, running as pr, as the create resolves a
// target (findTarget's answer, containerd's word on it).
func foundRunning(id string, pr proc) found {
	return found{matches: 1, pid: pr.pid, cgroups: pr.cgroups, ctr: &runtimeapi.Container{Id: id, PodSandboxId: pr.sandbox,
		Metadata: &runtimeapi.ContainerMetadata{Name: pr.name}, State: runtimeapi.ContainerState_CONTAINER_RUNNING}}
}

// find is the container of sandbox whose init has pid: the one NRI told
// of, else the one of the pod's running containers whose task containerd
// says has pid (a start whose PostStartContainer has not come yet); no
// match when none of the pod's has.
func (p *procs) find(ctx context.Context, sandbox string, pid uint32) (found, error) {
	if f := p.known(sandbox, pid); f.matches == 1 {
		return f, nil
	}
	resp, err := p.cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		PodSandboxId: sandbox, State: &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING}}})
	if err != nil {
		return found{}, fmt.Errorf("list the running containers of pod sandbox %s: %w", sandbox, err)
	}
	for _, c := range resp.GetContainers() {
		if c.GetPodSandboxId() != sandbox {
			continue
		}
		if got, err := p.tasks.TaskPID(ctx, c.GetId()); err == nil && got == pid {
			pr := proc{sandbox: sandbox, name: c.GetMetadata().GetName(), pid: pid}
			p.started(c.GetId(), pr)
			return foundRunning(c.GetId(), pr), nil
		}
	}
	return found{}, nil
}
