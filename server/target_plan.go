package server

import (
	"errors"
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/pins"
)

// plan is what a CreateContainer request asks of the shim: the kinds to join
// in the target, and namespace options whose mode is unknown to this build
// (they fall back to POD).
type plan struct {
	target  string
	kinds   []namespaces.Kind
	unknown []unknownMode
	// pid is, in the plugin mode, the pid whose PID namespace containerd
	// pointed the container at (its target's, when containerd looked); 0
	// for the proxy.
	pid uint32
	// found is, in the plugin mode, the target as NRI told of it (procs):
	// containerd's word, which the preparation takes instead of asking
	// containerd (findTarget) while containerd waits; nil for the proxy.
	found *found
}

type unknownMode struct {
	kind string // "pid", "ipc" or "network"
	mode runtimeapi.NamespaceMode
}

// planFor validates the namespace options of a CreateContainer request and
// returns nil when the shim has nothing to do (no TARGET, no unknown mode).
// A request it cannot honour is the caller's error, InvalidArgument.
func planFor(req criwire.Create) (*plan, error) {
	p, err := readPlan(req.Namespaces)
	if err != nil {
		return nil, invalidf("container %q: %w", req.Name, err)
	}
	return p, nil
}

// readPlan is planFor's reading of the options (opts; nil: none).
func readPlan(opts *criwire.Namespaces) (*plan, error) {
	if opts == nil {
		return nil, nil
	}
	p := &plan{}
	for _, o := range []struct {
		kind string
		mode runtimeapi.NamespaceMode
	}{{"pid", opts.PID}, {"ipc", opts.IPC}, {"network", opts.Network}} {
		switch o.mode {
		case runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_NODE:
		case runtimeapi.NamespaceMode_TARGET:
			if o.kind == "network" {
				return nil, errors.New("NamespaceMode TARGET is not supported for the network namespace (allowed: pid, ipc); all containers of a pod share its network namespace")
			}
			p.kinds = append(p.kinds, namespaces.Kind(o.kind))
		default:
			p.unknown = append(p.unknown, unknownMode{kind: o.kind, mode: o.mode})
		}
	}
	switch {
	case len(p.kinds) == 0 && len(p.unknown) == 0:
		return nil, nil
	case len(p.kinds) == 0:
		return p, nil
	case opts.TargetID == "":
		return nil, fmt.Errorf("NamespaceMode TARGET for %v: target_id is required", p.kinds)
	}
	if err := pins.ValidateID(opts.TargetID); err != nil {
		return nil, fmt.Errorf("NamespaceMode TARGET for %v: target_id %w", p.kinds, err)
	}
	p.target = opts.TargetID
	return p, nil
}
