package server

import (
	"context"

	"github.com/cri-nstarget/cri-nstarget/criwire"
)

// removePodSandbox forwards the request unchanged and then releases the pins
// of containers the backend no longer has (those of the removed pod). On NRI,
// the request is not forwarded while the shim registers with the backend's
// NRI, nor the other way round (registrationGate).
func (t *targeter) removePodSandbox(ctx context.Context, raw []byte, fwd forwardFunc) ([]byte, error) {
	done := func() {}
	if t.removals != nil {
		var err error
		if done, err = t.removals.Removal(ctx); err != nil {
			return nil, err
		}
	}
	out, err := func() ([]byte, error) {
		defer done()
		return fwd(ctx, raw)
	}()
	if err != nil {
		return nil, err
	}
	if id, err := criwire.SandboxID(raw); err == nil {
		t.handlers.removed(id)
	}
	if err := t.recon.releaseStale(ctx); err != nil {
		t.log.WithError(err).Warn("release pins after RemovePodSandbox; retried when the shim next starts")
	}
	return out, nil
}
