package server

import (
	"context"
)

// removePodSandbox forwards the request unchanged and then releases the pins
// of containers the backend no longer has (those of the removed pod).
func (t *targeter) removePodSandbox(ctx context.Context, raw []byte, fwd forwardFunc) ([]byte, error) {
	out, err := fwd(ctx, raw)
	if err != nil {
		return nil, err
	}
	if err := t.releaseStale(ctx); err != nil {
		t.log.WithError(err).Warn("release pins after RemovePodSandbox; retried when the shim next starts")
	}
	return out, nil
}
