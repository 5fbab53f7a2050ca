package soak

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// settled is how old a pod must be for recovery to wait for its runners: a
// pod made a moment ago is still starting, fault or not.
const settled = 45 * time.Second

// recovered tells whether the node is back after a fault that ended at
// end, and if not, what is missing: the shim answers Version, the node is
// Ready, every runner container of every settled pod is ready, and, once
// pods have been made after the fault, one of them has its runners ready
// (containerd still makes sandboxes and containers).
func (r *run) recovered(ctx context.Context, end time.Time) (bool, string) {
	if err := r.watch.call(ctx, "Version (shim)", func(ctx context.Context) error {
		_, err := r.node.shim.Runtime.Version(ctx, &runtimeapi.VersionRequest{})
		return err
	}); err != nil {
		return false, fmt.Sprintf("the shim does not answer: %v", err)
	}
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	if ready, err := r.node.api.nodeReady(cctx); err != nil || !ready {
		return false, fmt.Sprintf("node not Ready (%v)", err)
	}
	pods, err := r.node.api.listPods(cctx)
	if err != nil {
		return false, fmt.Sprintf("list pods: %v", err)
	}
	made, fresh := false, false
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		ok := runnersReady(&p)
		if p.CreationTimestamp.After(end) {
			made = true
			fresh = fresh || ok
		}
		if !ok && time.Since(p.CreationTimestamp.Time) > settled {
			return false, fmt.Sprintf("pod %s's runners not ready", p.Name)
		}
	}
	if made && !fresh {
		return false, "no pod made after the fault is running yet"
	}
	return true, ""
}

// runnersReady: the pod's long-running containers are all ready.
func runnersReady(p *corev1.Pod) bool {
	n := 0
	for _, s := range p.Status.ContainerStatuses {
		if runners[s.Name] {
			if !s.Ready {
				return false
			}
			n++
		}
	}
	return n > 0
}
