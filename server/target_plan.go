package server

import (
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
}

type unknownMode struct {
	kind string // "pid", "ipc" or "network"
	mode runtimeapi.NamespaceMode
}

// planFor validates the namespace options of a CreateContainer request and
// returns nil when the shim has nothing to do (no TARGET, no unknown mode).
func planFor(req criwire.Create) (*plan, error) {
	opts := req.Namespaces
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
				return nil, invalidf("container %q: NamespaceMode TARGET is not supported for the network namespace (allowed: pid, ipc); all containers of a pod share its network namespace", req.Name)
			}
			p.kinds = append(p.kinds, namespaces.Kind(o.kind))
		default:
			p.unknown = append(p.unknown, unknownMode{kind: o.kind, mode: o.mode})
		}
	}
	if len(p.kinds) == 0 && len(p.unknown) == 0 {
		return nil, nil
	}
	if len(p.kinds) > 0 {
		if opts.TargetID == "" {
			return nil, invalidf("container %q: NamespaceMode TARGET for %v: target_id is required", req.Name, p.kinds)
		}
		if err := pins.ValidateID(opts.TargetID); err != nil {
			return nil, invalidf("container %q: NamespaceMode TARGET for %v: target_id %w", req.Name, p.kinds, err)
		}
		p.target = opts.TargetID
	}
	return p, nil
}
