package server

import (
	"fmt"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// maxIDLen bounds a target_id. containerd ids are 64 hex digits; any CRI
// runtime's ids fit well within this.
const maxIDLen = 128

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
		if err := validateID(opts.TargetID); err != nil {
			return nil, invalidf("container %q: NamespaceMode TARGET for %v: %w", req.Name, p.kinds, err)
		}
		p.target = opts.TargetID
	}
	return p, nil
}

// validateID accepts a container id, or a unique prefix of one: ASCII
// letters and digits, with '.', '_' and '-' between them. Paths, "..", NUL,
// non-ASCII bytes and absurd lengths are refused.
func validateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("target_id is required")
	case len(id) > maxIDLen:
		return fmt.Errorf("target_id %q is %d bytes long; at most %d allowed", clip(id), len(id), maxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		sep := c == '.' || c == '_' || c == '-'
		if alnum || sep && i > 0 && i < len(id)-1 && isAlnum(id[i-1]) {
			continue
		}
		return fmt.Errorf("target_id %q has %q at byte %d; a container id is ASCII letters and digits, with single '.', '_' or '-' between them", clip(id), c, i)
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "..."
}
