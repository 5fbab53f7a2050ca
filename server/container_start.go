package server

import (
	"context"
	"fmt"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// startContainer checks, for a container with a pinned PID namespace, that
// the namespace can still be joined before the request goes to the backend
// unchanged. A PID namespace whose init has exited cannot take new processes:
// runc would fail with a cryptic error, so the shim falls back to the pod's
// namespace (or, strict, fails and removes the container).
func (s *Server) startContainer(ctx context.Context, raw []byte, fwd forwardFunc) ([]byte, error) {
	req := new(runtimeapi.StartContainerRequest)
	if err := proto.Unmarshal(raw, req); err != nil {
		return nil, invalidf("malformed StartContainerRequest: %w", err)
	}
	if path, ok := s.pins.Path(req.GetContainerId(), namespaces.PID); ok {
		if err := s.checkPID(ctx, req.GetContainerId(), path); err != nil {
			return nil, err
		}
	}
	return fwd(ctx, raw)
}

func (s *Server) checkPID(ctx context.Context, id, pin string) error {
	live, err := s.hasInit(pin)
	if err == nil && live {
		return nil
	}
	reason, why := "the target's PID namespace has no init left (the target exited after create)", reasonNamespaceGone
	if err != nil {
		reason, why = fmt.Sprintf("check the target's PID namespace: %v", err), reasonPinFailed
	}
	if s.strict {
		s.targeting(string(namespaces.PID), "start", resultRefused, why)
		s.discard(ctx, id)
		return preconditionf("container %q: strict targeting: %s; the container was removed", id, reason)
	}
	var target string
	err = s.specs.EditSpec(ctx, id, func(spec *specs.Spec) ([]oci.Opt, error) {
		rec, ok, err := oci.ParseRecord(spec.Annotations)
		if err != nil {
			return nil, err
		}
		r := rec.Namespaces[string(namespaces.PID)]
		if !ok || r.PodPath == "" {
			return nil, fmt.Errorf("no pod PID namespace recorded to fall back to")
		}
		target = rec.Target
		r.Result, r.Stage, r.Reason = oci.Fallback, "start", reason
		rec.Namespaces[string(namespaces.PID)] = r
		return []oci.Opt{oci.WithNamespacePath(specs.PIDNamespace, r.PodPath), oci.WithRecord(rec)}, nil
	})
	if err != nil {
		s.targeting(string(namespaces.PID), "start", resultRefused, whySpecNotUpdated(err))
		return preconditionf("container %q: %s, and falling back to the pod's PID namespace failed: %w", id, reason, err)
	}
	s.targeting(string(namespaces.PID), "start", oci.Fallback, why)
	s.log.WithFields(logrus.Fields{"container": id, "target": target, "namespace": "pid", "reason": reason, "reason_kind": why}).
		Warn("targeting fell back to the pod's namespace at start")
	return nil
}
