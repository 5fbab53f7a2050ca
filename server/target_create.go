package server

import (
	"context"
	"errors"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/cri-nstarget/cri-nstarget/intents"
	"github.com/cri-nstarget/cri-nstarget/nriplugin"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// createTargeted is createContainer for a request that asks for targeting
// (p), whose NRI event is to carry token, top to bottom: it starts
// preparing (resolving the target, opening its namespaces), records the
// intent, creates the container through the path chosen for it (createVia:
// NRI, Update, or refused), keeps the pins it joins, and reports. Each
// resource has one owner here and one deferred undo: the preparation
// (closed), the pins (released, but for those the answer keeps), the intent
// record (removed, or left to the reconciler with what the backend may have
// made; flight.end). A failed create leaves no container, no pin and no
// record (but one whose container the backend may have made, which the
// reconciler removes).
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

	c := &create{req: req, token: token, prep: prep, dec: t.decider(prep), pins: pins, flight: f, fwd: fwd, lctx: lctx, w: w}
	res, err := t.createVia(ctx, c)
	if err != nil {
		return nil, err
	}
	w.lap("point")
	if res.d.targets() {
		pins.keep(res.id)
	}
	t.report.outcome(res.id, res.via, res.d)
	t.after.created(res.id, res.d.rec)
	t.report.steps(res.id, res.via, res.took, w)
	failpoint("create:finished")
	return res.out, nil
}

// create is what one targeted create's paths share, owned by
// createTargeted: the request, its NRI token, the preparation, the pins,
// the intent record, the forward, and the context of the steps after the
// backend made the container (lctx); and its one decision (dec), made
// before the container exists, from which each try decides its container.
type create struct {
	req    createRequest
	token  string
	prep   *preparation
	dec    *decider
	pins   *createPins
	flight *flight
	fwd    forwardFunc
	lctx   context.Context
	w      *stopwatch
	// conflicted: a try lost to another NRI plugin; the next is the last
	// that may.
	conflicted bool
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

// createVia creates c's container, one try at a time: each chooses its
// path before its forward (choosePath; NRI, Update, or refused) and takes
// it (createThrough). A try that made nothing because the runtime refused
// NRI's namespace adjustments, or because another NRI plugin sets a
// namespace it targets (its decision then falls back for them, once:
// decider.conflicted), is tried again (tryAgain), through the path chosen
// then; the last try's error is the create's.
func (t *targeter) createVia(ctx context.Context, c *create) (created, error) {
	for try := 1; ; try++ {
		res, err := t.createThrough(ctx, c)
		var again *tryAgain
		if !errors.As(err, &again) {
			return res, err
		}
		if try == maxTries {
			return created{}, again.err
		}
	}
}

// maxTries bounds a create's tries: a conflict, the runtime's refusal of
// NRI, then the Update path.
const maxTries = 3

// tryAgain: the try made nothing (err, containerd's), and the create is to
// be tried again.
type tryAgain struct{ err error }

func (e *tryAgain) Error() string { return "nothing made, to be tried again: " + e.err.Error() }

// createThrough is one try of c's create, through the path chosen for it.
func (t *targeter) createThrough(ctx context.Context, c *create) (created, error) {
	a := &nriAnswer{t: t, c: c}
	p, err := t.choosePath(c, a)
	switch p {
	case pathNRI:
		return t.createViaNRI(ctx, c, a)
	case pathUpdate:
		return t.createViaUpdate(ctx, c)
	}
	return created{}, err
}

// createViaUpdate is the Update path, top to bottom, once the decision was
// made (its errors and strict refusals chose no path, and left nothing
// behind): it forwards the request as it would go without NRI, and points
// the container the backend made through containerd's API (pointSpec).
func (t *targeter) createViaUpdate(ctx context.Context, c *create) (created, error) {
	out, err := c.send(ctx, c.req.forms.Plain)
	if err != nil {
		return created{}, err
	}
	id, err := c.made(out)
	if err != nil {
		return created{}, err
	}
	return t.pointSpec(c, out, id)
}

// createViaNRI is the NRI path, top to bottom, once the answer a is
// registered: the request is forwarded with its token, and the answer
// points the container (or refuses it) inside containerd's create.
// Otherwise:
//   - containerd failed the create before its event came: the request's
//     own fault (an unknown target, say, or strict mode's refusal) comes
//     first, as when the shim prepares before it forwards.
//   - The runtime refuses namespace adjustments (NRI's validator, by
//     configuration): NRI is refused, and the create tried again (the
//     Update path, as every other until NRI reconnects).
//   - Another NRI plugin sets a namespace this create targets, and NRI
//     fails a create two plugins adjust alike: that plugin wins; the
//     create is tried again with those namespaces falling back (strict:
//     refused), its event answered with the record alone.
//   - The event was not answered on a live connection: the container is
//     pointed through containerd's API (pointSpec).
func (t *targeter) createViaNRI(ctx context.Context, c *create, a *nriAnswer) (created, error) {
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
		return t.pointSpec(c, out, id)
	case refusal != nil:
		// the answer refused: containerd made nothing
		c.flight.forwarded(refusal)
		return created{}, refusal
	case !answered:
		if a.id != "" {
			return created{}, err
		}
		if _, _, derr := c.dec.decided(); derr != nil {
			return created{}, derr
		}
		return created{}, err
	case nriplugin.IsNamespaceRefusal(err):
		t.nri.Refuse(err)
		t.log.WithError(err).Warn("the runtime refused the NRI namespace adjustment; targeting through containerd's API from now on")
		return created{}, &tryAgain{err}
	case nriplugin.IsNamespaceConflict(err) && !c.conflicted:
		c.conflicted = true
		if serr := c.dec.conflicted(a.d, err); serr != nil {
			return created{}, serr
		}
		return created{}, &tryAgain{err}
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

// pointSpec is the Update path's tail, for container id, which the backend
// made in the pod's namespaces (its answer out): the create's decision,
// made before it existed, is finished with the spec the backend stored
// (decideContainer, which takes the pins) and written into it. An error
// (the decision's own, too) means the container must not be kept.
func (t *targeter) pointSpec(c *create, out []byte, id string) (created, error) {
	tg, d, refusal := c.dec.decided()
	if refusal != nil {
		return created{}, refusal
	}
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
