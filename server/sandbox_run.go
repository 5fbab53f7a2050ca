package server

import (
	"context"

	"github.com/cri-nstarget/cri-nstarget/criwire"
)

// runPodSandbox forwards the request unchanged (its bytes as they came) and
// learns, from it and the backend's answer, the new pod sandbox's runtime
// handler (handlers): a TARGET create in a pod whose runtime cannot join
// namespace paths falls back before anything is made.
func (t *targeter) runPodSandbox(ctx context.Context, raw []byte, fwd forwardFunc) ([]byte, error) {
	out, err := fwd(ctx, raw)
	if err != nil || t.handlers == nil {
		return out, err
	}
	handler, herr := criwire.RuntimeHandler(raw)
	id, ierr := criwire.SandboxID(out)
	if herr == nil && ierr == nil {
		t.handlers.ran(id, handler)
	}
	return out, nil
}
