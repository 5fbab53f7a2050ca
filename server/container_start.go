package server

import (
	"context"

	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// startContainer checks, for a container with a pinned PID namespace, that
// the namespace can still be joined before the request goes to the backend
// unchanged. A PID namespace whose init has exited cannot take new processes:
// runc would fail with a cryptic error, so the shim falls back to the pod's
// namespace (or, strict, fails and removes the container).
func (t *targeter) startContainer(ctx context.Context, raw []byte, fwd forwardFunc) ([]byte, error) {
	req := new(runtimeapi.StartContainerRequest)
	if err := proto.Unmarshal(raw, req); err != nil {
		return nil, invalidf("malformed StartContainerRequest: %w", err)
	}
	if path, ok := t.pins.Path(req.GetContainerId(), namespaces.PID); ok {
		if err := t.checkPID(ctx, req.GetContainerId(), path); err != nil {
			return nil, err
		}
	}
	return fwd(ctx, raw)
}
