package server

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/nriplugin"
)

// forwarded is what the forward leaves: the backend's answer, whether
// containerd's NRI event reached the shim (asked), and the decision to go
// on from: the NRI answer's, final when the container was pointed inside
// the backend's create (pointed); nil for the create's own.
type forwarded struct {
	out     []byte
	asked   bool
	d       *decision
	pointed bool
	took    time.Duration // the NRI answer's share of the forward
}

// forward sends the request to the backend, TARGET (and unknown modes)
// rewritten as POD, with token if any, whose event ans answers. When
// containerd fails the create for the shim's adjustment, the create goes
// again (retryWithoutNRI).
func (t *targeter) forward(ctx, lctx context.Context, req createRequest, token string, ans *nriAnswer, fwd forwardFunc) (forwarded, error) {
	out, answered, refusal, err := t.send(ctx, lctx, req.raw, token, fwd)
	switch {
	case err == nil && answered:
		return forwarded{out: out, asked: true, d: &ans.d, pointed: true, took: ans.took}, nil
	case err == nil:
		if token != "" {
			t.log.WithField("name", req.Name).Warn("the NRI event for this container was not answered on a live connection; pointing its spec through containerd's API")
		}
		return forwarded{out: out, asked: ans != nil && ans.id != ""}, nil
	case refusal != nil:
		// the answer refused: containerd made nothing
		return forwarded{asked: true}, refusal
	case answered && (nriplugin.IsNamespaceRefusal(err) || nriplugin.IsNamespaceConflict(err)):
		return t.retryWithoutNRI(ctx, lctx, req, ans, err, fwd)
	}
	return forwarded{asked: ans != nil && ans.id != ""}, err
}

// send rewrites the request (raw) with token, forwards it, and settles
// token's event: whether it was answered on a live connection, and its
// refusal.
func (t *targeter) send(ctx, lctx context.Context, raw []byte, token string, fwd forwardFunc) (out []byte, answered bool, refusal, err error) {
	b, err := criwire.RewriteCreate(raw, tokenAnnotation(token)...)
	if err != nil {
		return nil, false, nil, fmt.Errorf("rewrite CreateContainerRequest: %w", err)
	}
	out, err = fwd(ctx, b)
	if token != "" {
		answered, refusal = t.nri.Settle(lctx, token)
	}
	return out, answered, refusal, err
}

// tokenAnnotation is the NRI token's annotation, none for no token.
func tokenAnnotation(token string) []criwire.Annotation {
	if token == "" {
		return nil
	}
	return []criwire.Annotation{{Key: nriplugin.AnnotationRequest, Value: token}}
}

// retryWithoutNRI forwards the request again after containerd failed it for
// the shim's NRI adjustment (cause), which ans answered: nothing was made.
//   - The runtime refuses namespace adjustments (NRI's validator, by
//     configuration): this create goes through the Update path, and every
//     other until NRI reconnects.
//   - Another NRI plugin sets a namespace this create targets, and NRI fails
//     a create two plugins adjust alike: that plugin wins. The targeted
//     namespaces fall back (strict: refused), and the event is answered with
//     the record alone.
func (t *targeter) retryWithoutNRI(ctx, lctx context.Context, req createRequest, ans *nriAnswer, cause error, fwd forwardFunc) (forwarded, error) {
	if nriplugin.IsNamespaceRefusal(cause) {
		t.nri.Refuse(cause)
		t.log.WithError(cause).Warn("the runtime refused the NRI namespace adjustment; targeting through containerd's API from now on")
		out, _, _, err := t.send(ctx, lctx, req.raw, "", fwd)
		return forwarded{out: out, asked: true}, err
	}
	d := ans.d
	d.fallBackTargeted(reasonNRIConflict, codes.FailedPrecondition,
		fmt.Sprintf("another NRI plugin sets this container's namespaces too, and wins (%v)", cause))
	if err := strictErr(&d, t.strict); err != nil {
		return forwarded{asked: true}, err
	}
	// d is the record-only answer's until it has returned
	token, again := t.expectNRI(req.SandboxID, req.Name, answerRecord(d))
	out, answered, _, err := t.send(ctx, lctx, req.raw, token, fwd)
	if answered {
		return forwarded{out: out, asked: true, d: &again.d, pointed: true, took: again.took}, err
	}
	return forwarded{out: out, asked: true, d: &d}, err
}
