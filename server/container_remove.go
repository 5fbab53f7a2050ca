package server

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cri-nstarget/cri-nstarget/criwire"
)

// removeContainer forwards the request unchanged and, once the backend no
// longer has the container, releases its pins. The id may be a unique
// prefix: it is resolved first, while the backend still has the container.
func (t *targeter) removeContainer(ctx context.Context, raw []byte, fwd forwardFunc) ([]byte, error) {
	cid, err := criwire.ContainerID(raw)
	if err != nil {
		// not protobuf: the backend answers it as it would directly
		return fwd(ctx, raw)
	}
	id, err := t.pinnedID(ctx, cid)
	if err != nil {
		// the pins stay for the start-up sweep; the removal goes ahead
		t.log.WithError(err).WithField("container", cid).Warn("resolve the id to release its pins")
	}
	out, err := fwd(ctx, raw)
	if err != nil && status.Code(err) != codes.NotFound {
		return nil, err
	}
	if id != "" {
		// released before forgotten: a catch-up that watches it after the
		// forget finds no pins (exitWatch.rewatch)
		if rerr := t.pins.Release(id); rerr != nil {
			t.log.WithError(rerr).WithField("container", id).Warn("release pins; retried when the shim next starts")
		}
		t.after.removed(id)
	}
	return out, err
}
