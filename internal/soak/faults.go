package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// restartDelay is the unit's RestartSec (systemd/cri-nstarget.service.in).
const restartDelay = 2 * time.Second

// inject carries out one fault; a non-nil error is a finding of the run.
func (r *run) inject(ctx context.Context, k FaultKind) error {
	switch k {
	case ShimKill:
		return r.node.restartShim(ctx, true, restartDelay)
	case ShimTerm:
		return r.node.restartShim(ctx, false, restartDelay)
	case ContainerdRestart:
		return r.node.backend.Containerd.Restart(ctx)
	case TargetKilled:
		return r.killTargetAtDebug(ctx)
	case NRIDuringRemoval:
		return r.registerDuringRemoval(ctx)
	}
	return fmt.Errorf("unknown fault %q", k)
}

// killTargetAtDebug asks for a debug container against a running target
// and kills the target's process (SIGKILL, from the host) the moment the
// shim records the create's intent: the create is in flight.
func (r *run) killTargetAtDebug(ctx context.Context) error {
	pod, _, ok := r.work.pick(func(n string) bool { return strings.HasPrefix(n, "soak-run-") })
	if !ok {
		return errors.New("no pod to debug")
	}
	target := "app"
	pid, err := r.targetPID(ctx, pod, target)
	if err != nil {
		return fmt.Errorf("find %s/%s's process: %w", pod, target, err)
	}
	dir := filepath.Join(r.node.shim.StateDir(), "intents")
	before := entries(dir)
	if _, err := r.work.debug(ctx, pod, target, true); err != nil {
		return fmt.Errorf("debug %s: %w", pod, err)
	}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if slices.ContainsFunc(entries(dir), func(e string) bool { return !slices.Contains(before, e) }) {
			break
		}
	}
	restarts := r.restarts(ctx, pod, target)
	r.logf("fault: SIGKILL to %s/%s (pid %d) as its debug container is made", pod, target, pid)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %d: %w", pid, err)
	}
	// part of the recovery: the kubelet restarts the target
	for deadline := time.Now().Add(r.cfg.RecoveryBound); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if n := r.restarts(ctx, pod, target); n < 0 || n > restarts {
			break
		}
	}
	return nil
}

// restarts is the restart count of pod's container name once it is ready
// again, -1 when the pod is gone.
func (r *run) restarts(ctx context.Context, pod, name string) int {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	p, err := r.node.api.getPod(cctx, pod)
	if err != nil || p.DeletionTimestamp != nil {
		return -1
	}
	for _, s := range p.Status.ContainerStatuses {
		if s.Name == name && s.Ready {
			return int(s.RestartCount)
		}
	}
	return 0
}

func entries(dir string) []string {
	es, _ := os.ReadDir(dir)
	names := make([]string, len(es))
	for i, e := range es {
		names[i] = e.Name()
	}
	return names
}

// targetPID is the host pid of the running container name of pod, from
// containerd's verbose status.
func (r *run) targetPID(ctx context.Context, pod, name string) (int, error) {
	var resp *runtimeapi.ListContainersResponse
	if err := r.watch.call(ctx, "ListContainers", func(ctx context.Context) (err error) {
		resp, err = r.node.direct.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
			State:         &runtimeapi.ContainerStateValue{State: runtimeapi.ContainerState_CONTAINER_RUNNING},
			LabelSelector: map[string]string{"io.kubernetes.pod.name": pod, "io.kubernetes.container.name": name},
		}})
		return err
	}); err != nil {
		return 0, err
	}
	if len(resp.GetContainers()) == 0 {
		return 0, errors.New("not running")
	}
	var st *runtimeapi.ContainerStatusResponse
	if err := r.watch.call(ctx, "ContainerStatus", func(ctx context.Context) (err error) {
		st, err = r.node.direct.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: resp.GetContainers()[0].GetId(), Verbose: true})
		return err
	}); err != nil {
		return 0, err
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil || info.Pid == 0 {
		return 0, fmt.Errorf("no pid in containerd's info: %v", err)
	}
	return info.Pid, nil
}

// registerDuringRemoval deletes a few pods, and once the kubelet has
// stopped them restarts containerd and removes their sandboxes through the
// shim back to back, as the kubelet's garbage collection does: the shim's
// NRI plugin registers again (containerd came back) while the removals are
// in containerd. Then it makes as many pods again. Each removal has the watchdog's deadline; containerd's
// plugin-sync deadlock shows as a hang here and in every call after it.
func (r *run) registerDuringRemoval(ctx context.Context) error {
	const n = 5
	var uids []string
	var kinds []podKind
	for range n {
		name, k, ok := r.work.pick(nil)
		if !ok {
			break
		}
		p, err := r.node.api.getPod(ctx, name)
		if err != nil {
			continue
		}
		uids, kinds = append(uids, string(p.UID)), append(kinds, k)
		r.work.deletePod(ctx, name)
	}
	// as many pods again once the removals are done
	defer func() {
		for _, k := range kinds {
			r.work.makePod(ctx, k)
		}
	}()
	// the kubelet stops the pods' sandboxes; their containers stay until
	// its garbage collection, which is what the removals race
	sandboxes := map[string]bool{}
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		var resp *runtimeapi.ListPodSandboxResponse
		if err := r.watch.call(ctx, "ListPodSandbox", func(ctx context.Context) (err error) {
			resp, err = r.node.direct.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
			return err
		}); err != nil {
			continue
		}
		ready := 0
		clear(sandboxes)
		for _, sb := range resp.GetItems() {
			if slices.Contains(uids, sb.GetMetadata().GetUid()) {
				sandboxes[sb.GetId()] = true
				if sb.GetState() == runtimeapi.PodSandboxState_SANDBOX_READY {
					ready++
				}
			}
		}
		if ready == 0 {
			break
		}
	}
	if err := r.node.backend.Containerd.Restart(ctx); err != nil {
		return err
	}
	r.logf("fault: containerd restarted; removing %d sandboxes through the shim while it registers with NRI again", len(sandboxes))
	rt := r.node.shim.Runtime
	var errs []error
	for id := range sandboxes {
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			err = r.watch.call(ctx, "RemovePodSandbox", func(ctx context.Context) error {
				_, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
				return err
			})
			if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("RemovePodSandbox %.12s: %w", id, err))
		}
	}
	return errors.Join(errs...)
}
