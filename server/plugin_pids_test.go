package server

import (
	"context"
	"testing"

	nriapi "github.com/containerd/nri/pkg/api"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// listCRI is containerd's CRI as procs.find asks it: the pod's containers.
type listCRI struct {
	backendCRI
	ctrs  []*runtimeapi.Container
	lists int
}

func (l *listCRI) ListContainers(_ context.Context, req *runtimeapi.ListContainersRequest, _ ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error) {
	l.lists++
	var out []*runtimeapi.Container
	for _, c := range l.ctrs {
		if c.GetPodSandboxId() == req.GetFilter().GetPodSandboxId() {
			out = append(out, c)
		}
	}
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

// pidsOf is containerd's word on tasks: each container's pid.
type pidsOf map[string]uint32

func (p pidsOf) TaskPID(_ context.Context, id string) (uint32, error) {
	if pid, ok := p[id]; ok {
		return pid, nil
	}
	return 0, errTaskNotRunning
}

func running(id, sandbox string, pid uint32) *nriapi.Container {
	return &nriapi.Container{Id: id, PodSandboxId: sandbox, Pid: pid, State: nriapi.ContainerState_CONTAINER_RUNNING}
}

// The pid containerd writes into a TARGET container's spec maps back to the
// running container of the same pod with that pid: as NRI told it
// (Synchronize, PostStartContainer), else as containerd says; never another
// pod's, never one that stopped or was removed, and the newest start holds
// a pid that was reused.
func TestProcsFind(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		synced []*nriapi.Container
		then   func(p *procs)
		cri    []*runtimeapi.Container // containerd's CRI, for a pid NRI did not tell of
		tasks  pidsOf
		pid    uint32
		want   string
		lists  int // calls to containerd's CRI
	}{
		{desc: "told by Synchronize", synced: []*nriapi.Container{running("app", "sb", 100), running("side", "sb", 200)}, pid: 100, want: "app"},
		{desc: "another pod's container with the pid is none", synced: []*nriapi.Container{running("app", "sb2", 100)}, pid: 100, want: "", lists: 1},
		{desc: "a container without a process is none", synced: []*nriapi.Container{{Id: "app", PodSandboxId: "sb", Pid: 100, State: nriapi.ContainerState_CONTAINER_STOPPED}},
			pid: 100, want: "", lists: 1},
		{desc: "told by PostStartContainer", then: func(p *procs) { p.started("app", proc{sandbox: "sb", pid: 100}) }, pid: 100, want: "app"},
		{desc: "a reused pid is the newest start's", synced: []*nriapi.Container{running("old", "sb", 100)},
			then: func(p *procs) { p.started("new", proc{sandbox: "sb", pid: 100}) }, pid: 100, want: "new"},
		{desc: "removed", synced: []*nriapi.Container{running("app", "sb", 100)}, then: func(p *procs) { p.removed("app") }, pid: 100, want: "", lists: 1},
		{desc: "its pod removed", synced: []*nriapi.Container{running("app", "sb", 100)}, then: func(p *procs) { p.podRemoved("sb") }, pid: 100, want: "", lists: 1},
		{desc: "not told yet: containerd's word", cri: []*runtimeapi.Container{{Id: "other", PodSandboxId: "sb"}, {Id: "app", PodSandboxId: "sb"}},
			tasks: pidsOf{"other": 300, "app": 100}, pid: 100, want: "app", lists: 1},
		{desc: "containerd's word: another pod's is none", cri: []*runtimeapi.Container{{Id: "app", PodSandboxId: "sb2"}},
			tasks: pidsOf{"app": 100}, pid: 100, want: "", lists: 1},
		{desc: "containerd's word: no task with the pid", cri: []*runtimeapi.Container{{Id: "app", PodSandboxId: "sb"}},
			tasks: pidsOf{"app": 101}, pid: 100, want: "", lists: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			cri := &listCRI{ctrs: tc.cri}
			p := newProcs(cri, tc.tasks)
			p.reset(tc.synced)
			if tc.then != nil {
				tc.then(p)
			}
			got, err := p.find(context.Background(), "sb", tc.pid)
			if err != nil || got.ctr.GetId() != tc.want || (tc.want != "" && (got.pid != tc.pid || got.ctr.GetPodSandboxId() != "sb")) {
				t.Errorf("find(sb, %d) = %+v, %v; want %q", tc.pid, got, err, tc.want)
			}
			if cri.lists != tc.lists {
				t.Errorf("asked containerd's CRI %d times, want %d", cri.lists, tc.lists)
			}
		})
	}
}
