package soak

import (
	"context"
	"fmt"
	"path/filepath"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/pins"
)

// leaks lists what no pod owns: sandboxes and containers in containerd of
// pods the apiserver no longer has, pins of containers containerd no longer
// has, intent records (the node is quiet: no create is in flight), and
// mounts under the shim's state dir other than the pins of live containers.
func (r *run) leaks(ctx context.Context) ([]string, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	pods, err := r.node.api.listPods(cctx)
	if err != nil {
		return nil, err
	}
	owned := map[string]bool{}
	for _, p := range pods {
		owned[string(p.UID)] = true
	}
	var sbs *runtimeapi.ListPodSandboxResponse
	if err := r.watch.call(ctx, "ListPodSandbox", func(ctx context.Context) (err error) {
		sbs, err = r.node.direct.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
		return err
	}); err != nil {
		return nil, err
	}
	var cs *runtimeapi.ListContainersResponse
	if err := r.watch.call(ctx, "ListContainers", func(ctx context.Context) (err error) {
		cs, err = r.node.direct.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
		return err
	}); err != nil {
		return nil, err
	}
	var left []string
	for _, sb := range sbs.GetItems() {
		if !owned[sb.GetMetadata().GetUid()] {
			left = append(left, fmt.Sprintf("sandbox %.12s of pod %s", sb.GetId(), sb.GetMetadata().GetName()))
		}
	}
	live := map[string]bool{}
	for _, c := range cs.GetContainers() {
		live[c.GetId()] = true
		if !owned[c.GetLabels()["io.kubernetes.pod.uid"]] {
			left = append(left, fmt.Sprintf("container %.12s (%s of pod %s)", c.GetId(), c.GetMetadata().GetName(), c.GetLabels()["io.kubernetes.pod.name"]))
		}
	}
	state := r.node.shim.StateDir()
	for _, e := range entries(pins.Under(state)) {
		if !live[e] {
			left = append(left, "pin "+e)
		}
	}
	for _, e := range entries(filepath.Join(state, "intents")) {
		left = append(left, "intent record "+e)
	}
	mounts, err := harness.MountsUnder(state)
	if err != nil {
		return nil, err
	}
	for _, m := range mounts {
		if id, ok := pins.ContainerOf(state, m); !ok || !live[id] {
			left = append(left, "mount "+m)
		}
	}
	return left, nil
}
