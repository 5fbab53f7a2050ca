package server

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/cri-nstarget/cri-nstarget/nriplugin"
)

// forwarded is what the forward leaves: the backend's answer, whether the
// request went through NRI (a token was registered for its first try),
// whether it was sent at all, whether containerd's NRI event reached the
// shim (asked), and the
// decision to go on from: the NRI answer's, final when the container was
// pointed inside the backend's create (pointed); nil for the create's own.
type forwarded struct {
	out     []byte
	viaNRI  bool
	sent    bool // the request reached the backend (it may have made the container)
	asked   bool
	d       *decision
	pointed bool
	took    time.Duration // the NRI answer's share of the forward
}

// forward sends the request to the backend, TARGET (and unknown modes)
// rewritten as POD, in one try or two. Each try registers answer for
// containerd's NRI event for the container (expectNRI), sends the request in
// the form for that (Annotated, with token; Plain without NRI), and settles
// the event. When NRI is not usable now (the Update path), the first try
// calls first before anything is sent. A second try follows when
// containerd failed the first for the shim's answer (nothing was made):
//   - The runtime refuses namespace adjustments (NRI's validator, by
//     configuration): NRI is refused, and this create goes through the
//     Update path, as every other until NRI reconnects.
//   - Another NRI plugin sets a namespace this create targets, and NRI fails
//     a create two plugins adjust alike: that plugin wins. The targeted
//     namespaces fall back (strict: refused), and the second try's event,
//     with the same token, is answered with the record alone.
func (t *targeter) forward(ctx, lctx context.Context, req createRequest, token string, answer answerFunc, first func() error, fwd forwardFunc) (fw forwarded, _ error) {
	for try := 1; ; try++ {
		b, sent := req.forms.Plain, ""
		ans := t.expectNRI(token, req.SandboxID, req.Name, answer)
		if ans != nil {
			b, sent = req.forms.Annotated, token
		}
		if try == 1 {
			if fw.viaNRI = ans != nil; !fw.viaNRI {
				if err := first(); err != nil {
					return fw, err
				}
			}
		}
		fw.sent = true
		out, err := fwd(ctx, b)
		answered, refusal := t.settleNRI(lctx, sent)
		fw.out, fw.asked = out, fw.asked || ans != nil && ans.id != ""
		switch {
		case err == nil && answered:
			fw.d, fw.pointed, fw.took = &ans.d, true, ans.took
			return fw, nil
		case err == nil:
			if ans != nil {
				t.log.WithField("name", req.Name).Warn("the NRI event for this container was not answered on a live connection; pointing its spec through containerd's API")
			}
			return fw, nil
		case refusal != nil:
			// the answer refused: containerd made nothing
			return fw, refusal
		case try > 1 || !answered:
			return fw, err
		case nriplugin.IsNamespaceRefusal(err):
			t.nri.Refuse(err)
			t.log.WithError(err).Warn("the runtime refused the NRI namespace adjustment; targeting through containerd's API from now on")
		case nriplugin.IsNamespaceConflict(err):
			d := ans.d
			d.fallBackTargeted(reasonNRIConflict, codes.FailedPrecondition,
				fmt.Sprintf("another NRI plugin sets this container's namespaces too, and wins (%v)", err))
			if err := strictErr(&d, t.strict); err != nil {
				return fw, err
			}
			answer, fw.d = answerRecord(d), &d // d is the record-only answer's until it has returned
		default:
			return fw, err
		}
	}
}

// settleNRI ends the wait for token's event, if any: whether it was
// answered on a live connection, and its refusal. A no-op once settled.
func (t *targeter) settleNRI(ctx context.Context, token string) (answered bool, refusal error) {
	if token == "" {
		return false, nil
	}
	return t.nri.Settle(ctx, token)
}
