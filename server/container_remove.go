package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// removeContainer forwards the request unchanged and, once the backend no
// longer has the container, releases its pins.
func (t *targeter) removeContainer(ctx context.Context, raw []byte, fwd forwardFunc) ([]byte, error) {
	out, err := fwd(ctx, raw)
	if err != nil && status.Code(err) != codes.NotFound {
		return nil, err
	}
	req := new(runtimeapi.RemoveContainerRequest)
	if proto.Unmarshal(raw, req) == nil {
		if rerr := t.pins.Release(req.GetContainerId()); rerr != nil {
			t.log.WithError(rerr).WithField("container", req.GetContainerId()).Warn("release pins; retried when the shim next starts")
		}
	}
	return out, err
}
