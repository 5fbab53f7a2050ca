package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// removeContainer forwards the request unchanged and, once the backend no
// longer has the container, releases its pins. The id may be a unique
// prefix: it is resolved first, while the backend still has the container.
func (t *targeter) removeContainer(ctx context.Context, raw []byte, fwd forwardFunc) ([]byte, error) {
	req := new(runtimeapi.RemoveContainerRequest)
	if err := proto.Unmarshal(raw, req); err != nil {
		return nil, invalidf("malformed RemoveContainerRequest: %w", err)
	}
	id, err := t.pinnedID(ctx, req.GetContainerId())
	if err != nil {
		// the pins stay for the start-up sweep; the removal goes ahead
		t.log.WithError(err).WithField("container", req.GetContainerId()).Warn("resolve the id to release its pins")
	}
	out, err := fwd(ctx, raw)
	if err != nil && status.Code(err) != codes.NotFound {
		return nil, err
	}
	if id != "" {
		if rerr := t.pins.Release(id); rerr != nil {
			t.log.WithError(rerr).WithField("container", id).Warn("release pins; retried when the shim next starts")
		}
	}
	return out, err
}
