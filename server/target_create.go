package server

import (
	"context"
	"fmt"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"

	"github.com/cri-nstarget/cri-nstarget/intents"
	"github.com/cri-nstarget/cri-nstarget/nriplugin"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// createTargeted is createContainer for a request that asks for targeting
// (p), whose NRI event is to carry token, top to bottom: it starts
// preparing (resolving the target, opening its namespaces), records the
// intent, creates the container through NRI (createViaNRI) or through
// containerd's API (createViaUpdate), keeps the pins it joins, and
// reports. Each resource has one owner here and one deferred undo: the
// preparation (closed), the pins (released, but for those the answer
// keeps), the intent record (removed, or left to the reconciler with what
// the backend may have made; flight.end). A failed create leaves no
// container, no pin and no record (but one whose container the backend may
// have made, which the reconciler removes).
func (t *targeter) createTargeted(ctx context.Context, req createRequest, token string, p *plan, fwd forwardFunc) (_ []byte, retErr error) {
	w := t.report.stopwatch()
	defer func() { t.report.refused(retErr) }()
	// The shim's own steps do not depend on the caller: one that gives up
	// after the backend made the container must not leave it half-made.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lateStepsTimeout)
	defer cancel()

	prep := t.prepare(ctx, lctx, req.Create, p)
	defer prep.close()

	// The pins are taken where the container is decided (decideContainer,
	// in the NRI answer or in the Update path's spec edit), for the
	// container the backend makes; released when the create ends, but for
	// the container it answers with, when that joins them (keep, below).
	pins := &createPins{store: t.pins, inFlight: &t.recon.pinning, log: t.log}
	defer pins.release()

	// Written down before anything is created; removed when the create
	// ends, or left for the reconciler: a crash in between leaves a record
	// that start-up reconciles.
	f, err := t.recon.begin(intents.Record{ID: intents.NewID(), Sandbox: req.SandboxID, Name: req.Name, Attempt: req.Attempt, Target: p.target})
	if err != nil {
		return nil, err
	}
	defer func() { f.end(lctx, retErr) }()
	failpoint("create:recorded")
	w.lap("prepare_record")

	c := &create{req: req, token: token, prep: prep, pins: pins, flight: f, fwd: fwd, lctx: lctx, w: w}
	var res created
	if token != "" {
		res, err = t.createViaNRI(ctx, c)
	} else {
		res, err = t.createViaUpdate(ctx, c)
	}
	if err != nil {
		return nil, err
	}
	w.lap("point")
	if res.d.targets() {
		pins.keep(res.id)
	}
	t.report.outcome(res.id, res.via, res.d)
	t.report.steps(res.id, res.via, res.took, w)
	failpoint("create:finished")
	return res.out, nil
}

// create is what one targeted create's paths share, owned by
// createTargeted: the request, its NRI token, the preparation, the pins,
// the intent record, the forward, and the context of the steps after the
// backend made the container (lctx).
type create struct {
	req    createRequest
	token  string
	prep   *preparation
	pins   *createPins
	flight *flight
	fwd    forwardFunc
	lctx   context.Context
	w      *stopwatch
}

// created is what a path answers: the backend's answer (out) naming the
// container (id), what targeting decided for it (d), how its spec was
// written (via), and the NRI answer's share of the forward (took).
type created struct {
	out  []byte
	id   string
	d    decision
	via  string
	took time.Duration
}

// send forwards the request in form b (TARGET rewritten as POD), and tells
// the intent record how it went.
func (c *create) send(ctx context.Context, b []byte) ([]byte, error) {
	out, err := c.fwd(ctx, b)
	c.flight.forwarded(err)
	return out, err
}

// made is the container the backend's answer (out) names, added to the
// intent record.
func (c *create) made(out []byte) (string, error) {
	c.w.lap("forward")
	id, err := c.flight.made(out)
	if err != nil {
		return "", err
	}
	failpoint("create:forwarded")
	return id, nil
}

// createViaUpdate is the Update path, top to bottom: it waits for the
// preparation and what is decided before the container exists (before),
// so that its errors and strict refusals leave nothing behind, forwards
// the request as it would go without NRI, and points the container the
// backend made through containerd's API (pointSpec).
func (t *targeter) createViaUpdate(ctx context.Context, c *create) (created, error) {
	tg, d, err := t.before(c.prep)
	if err != nil {
		return created{}, err
	}
	out, err := c.send(ctx, c.req.forms.Plain)
	if err != nil {
		return created{}, err
	}
	id, err := c.made(out)
	if err != nil {
		return created{}, err
	}
	return t.pointSpec(c, out, id, tg, d)
}

// createViaNRI is the NRI path, top to bottom: the create registers its
// answer to containerd's NRI event for the container (nriAnswer), forwards
// the request with its token, and the answer points the container (or
// refuses it) inside containerd's create. Otherwise:
//   - NRI is not usable now: the Update path (createViaUpdate), or, for
//     NRI only, a refusal (withoutNRI).
//   - containerd failed the create before its event came: the request's
//     own fault (an unknown target, say, or strict mode's refusal) comes
//     first, as when the shim prepares before it forwards.
//   - The runtime refuses namespace adjustments (NRI's validator, by
//     configuration): NRI is refused, and this create goes through the
//     Update path, as every other until NRI reconnects.
//   - Another NRI plugin sets a namespace this create targets, and NRI
//     fails a create two plugins adjust alike: that plugin wins
//     (createConflicted).
//   - The event was not answered on a live connection: the container is
//     pointed through containerd's API (pointSpec).
func (t *targeter) createViaNRI(ctx context.Context, c *create) (created, error) {
	a := &nriAnswer{t: t, c: c}
	if !t.expect(c, a) {
		if err := t.withoutNRI(c.prep); err != nil {
			return created{}, err
		}
		return t.createViaUpdate(ctx, c)
	}
	defer t.nri.Settle(c.lctx, c.token) // a panic in the forward leaves nothing registered
	out, err := c.send(ctx, c.req.forms.Annotated)
	answered, refusal := t.nri.Settle(c.lctx, c.token)
	switch {
	case err == nil && answered:
		return c.pointedBy(a, out)
	case err == nil:
		t.notAnswered(c)
		id, err := c.made(out)
		if err != nil {
			return created{}, err
		}
		tg, d, err := t.before(c.prep)
		if err != nil {
			return created{}, err
		}
		return t.pointSpec(c, out, id, tg, d)
	case refusal != nil:
		// the answer refused: containerd made nothing
		c.flight.forwarded(refusal)
		return created{}, refusal
	case !answered:
		if a.id == "" {
			if _, _, perr := t.before(c.prep); perr != nil {
				return created{}, perr
			}
		}
		return created{}, err
	case nriplugin.IsNamespaceRefusal(err):
		t.nri.Refuse(err)
		t.log.WithError(err).Warn("the runtime refused the NRI namespace adjustment; targeting through containerd's API from now on")
		return t.createViaUpdate(ctx, c)
	case nriplugin.IsNamespaceConflict(err):
		return t.createConflicted(ctx, c, a.d, err)
	}
	return created{}, err
}

// createConflicted is the second try of a create whose namespaces another
// NRI plugin sets too (conflict, containerd's error): that plugin wins. The
// targeted namespaces of d, the first answer's decision, fall back (strict:
// refused), and the second try's event, with the same token, is answered
// with the record alone; through containerd's API when NRI is not usable
// any more, or the event is not answered.
func (t *targeter) createConflicted(ctx context.Context, c *create, d decision, conflict error) (created, error) {
	d.fallBackTargeted(reasonNRIConflict, codes.FailedPrecondition,
		fmt.Sprintf("another NRI plugin sets this container's namespaces too, and wins (%v)", conflict))
	if err := strictErr(&d, t.strict); err != nil {
		return created{}, err
	}
	a := &nriAnswer{t: t, c: c, only: &d}
	b, registered := c.req.forms.Plain, t.expect(c, a)
	if registered {
		b = c.req.forms.Annotated
		defer t.nri.Settle(c.lctx, c.token) // a panic in the forward leaves nothing registered
	}
	out, err := c.send(ctx, b)
	answered, refusal := t.nri.Settle(c.lctx, c.token)
	switch {
	case err == nil && answered:
		return c.pointedBy(a, out)
	case err == nil:
		if registered {
			t.notAnswered(c)
		}
		id, err := c.made(out)
		if err != nil {
			return created{}, err
		}
		tg, _ := c.prep.wait()
		return t.pointSpec(c, out, id, tg, d)
	case refusal != nil:
		c.flight.forwarded(refusal)
		return created{}, refusal
	}
	return created{}, err
}

// pointedBy is the create's answer when the backend made the container
// (out) pointed by the NRI answer a.
func (c *create) pointedBy(a *nriAnswer, out []byte) (created, error) {
	id, err := c.made(out)
	if err != nil {
		return created{}, err
	}
	return created{out: out, id: id, d: a.d, via: ViaNRI, took: a.took}, nil
}

// notAnswered says that c's NRI event was not answered on a live
// connection although the backend made the container.
func (t *targeter) notAnswered(c *create) {
	t.log.WithField("name", c.req.Name).Warn("the NRI event for this container was not answered on a live connection; pointing its spec through containerd's API")
}

// before waits for the preparation, and answers the target and what is
// decided before the container exists (decisionFor); or the caller's
// error, or strict mode's refusal of what already falls back.
func (t *targeter) before(prep *preparation) (*target, decision, error) {
	tg, err := prep.wait()
	if err != nil {
		return nil, decision{}, err
	}
	d := decisionFor(prep.req, prep.p, tg)
	return tg, d, strictErr(&d, t.strict)
}

// withoutNRI is NRI-only targeting's answer to a create while NRI is not
// usable: refused when it has namespaces to join, nil when it may take the
// Update path (nothing to join, or not configured for NRI only).
func (t *targeter) withoutNRI(prep *preparation) error {
	if !t.nriOnly {
		return nil
	}
	_, d, err := t.before(prep)
	if err == nil && d.targets() {
		_, why := t.nri.Usable()
		err = coded(codes.Unavailable, "container %q: targeting is configured to go through NRI only, and NRI is not usable: %s", prep.req.Name, why)
	}
	return err
}

// pointSpec is the Update path's tail, for container id, which the backend
// made in the pod's namespaces (its answer out): the decision d, made
// before it existed, is finished with the spec the backend stored
// (decideContainer, which takes the pins) and written into it. An error
// means the container must not be kept.
func (t *targeter) pointSpec(c *create, out []byte, id string, tg *target, d decision) (created, error) {
	var refusal error
	err := t.records.edit(c.lctx, id, func(spec *specs.Spec) ([]oci.Opt, error) {
		var pt pointing
		if pt, refusal = t.decideContainer(&d, tg, viewOfSpec(spec), t.decideEnv(id, c.pins)); refusal != nil {
			return nil, refusal
		}
		return renderSpec(&d, pt), nil
	})
	switch {
	case refusal != nil:
		return created{}, refusal
	case err != nil:
		if err := specNotWritten(&d, err, t.strict); err != nil {
			return created{}, err
		}
	}
	return created{out: out, id: id, d: d, via: ViaUpdate}, nil
}
