package server

import (
	"context"
	"fmt"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/intents"
	"github.com/cri-nstarget/cri-nstarget/nriplugin"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// createContainer handles CreateContainer, read off the wire (criwire):
// requests with neither TARGET nor an unknown NamespaceMode, and bytes that
// are not protobuf, go to the backend byte for byte; the others are
// targeted (createTargeted).
func (t *targeter) createContainer(ctx context.Context, raw []byte, fwd forwardFunc) ([]byte, error) {
	req, err := criwire.ReadCreate(raw)
	if err != nil {
		// not protobuf: the backend answers it as it would directly
		return fwd(ctx, raw)
	}
	p, err := planFor(req)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return fwd(ctx, raw)
	}
	return t.createTargeted(ctx, req, p, raw, fwd)
}

// createTargeted is createContainer for a request that asks for targeting
// (p), top to bottom: it starts preparing (resolving the target, opening
// its namespaces), records the intent, forwards the request with POD in
// place of TARGET, points the new container at pins of the target's
// namespaces, and reports. On the NRI path the request is forwarded as soon
// as the intent is recorded: the preparation goes on while containerd
// creates the container, and the answer to containerd's event for it waits
// for the preparation, and points it (or refuses it) inside containerd's
// create. On the Update path the preparation comes first, and the spec is
// pointed after the create. Each acquisition is followed by its undo,
// deferred on retErr: a failed create leaves no container, no pin and no
// record.
func (t *targeter) createTargeted(ctx context.Context, req criwire.Create, p *plan, raw []byte, fwd forwardFunc) (_ []byte, retErr error) {
	w := t.report.stopwatch()
	defer func() { t.report.refused(retErr) }()
	// The shim's own steps do not depend on the caller: one that gives up
	// after the backend made the container must not leave it half-made.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lateStepsTimeout)
	defer cancel()

	prep := t.prepare(ctx, lctx, req, p)
	defer prep.close()

	// The pins are taken for the container the backend makes, in its NRI
	// event or after it (decide); the one undo releases them all but for
	// the container kept, when it joins one.
	pins := &createPins{store: t.pins, inFlight: &t.recon.pinning, log: t.log}
	var (
		id string   // the container the backend made
		tg *target  // the target, once waited for
		d  decision // what targeting decided for the container
	)
	defer func() { pins.release(kept(id, &d, retErr)) }()

	token, ans := t.expectNRI(req.SandboxID, req.Name, t.answerTargeting(prep, pins))
	defer t.settleNRI(lctx, token) // a request never sent: no event to wait for
	if token == "" {
		// The Update path: prepared before anything is forwarded
		var err error
		if tg, d, err = t.preparedFirst(prep); err != nil {
			return nil, err
		}
	}

	// Written down before anything is created, removed once the answer is
	// ready: a crash in between leaves a record that start-up reconciles.
	f, err := t.recon.begin(intents.Record{ID: intents.NewID(), Sandbox: req.SandboxID, Name: req.Name, Attempt: req.Attempt, Target: p.target})
	if err != nil {
		return nil, err
	}
	defer f.end()
	failpoint("create:recorded")
	w.lap("prepare_record")

	fw, err := t.forward(ctx, lctx, raw, req, token, ans, fwd)
	w.lap("forward")
	if err != nil {
		f.unanswered(err)
		return nil, t.firstFault(prep, token, fw, err)
	}
	if id, err = f.made(fw.out); err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil && !t.recon.discard(lctx, f.record) {
			f.handOver() // left for the reconciler, which removes it
		}
	}()
	failpoint("create:forwarded")

	via, err := t.point(lctx, id, fw, prep, tg, &d, pins)
	if err != nil {
		return nil, err
	}
	w.lap("point")
	t.report.outcome(id, via, d)
	t.report.steps(id, via, fw.took, w)
	failpoint("create:finished")
	return fw.out, nil
}

// kept is the container whose pins the create keeps: id, once the create
// succeeded (err) and d has it join one; "" for none.
func kept(id string, d *decision, err error) string {
	if err != nil || !d.targets() {
		return ""
	}
	return id
}

// preparedFirst is the Update path's start: it waits for the preparation
// before anything is forwarded, so that its errors and strict refusals
// leave nothing behind. Configured for NRI only, a create with namespaces
// to join is refused while NRI is not usable.
func (t *targeter) preparedFirst(prep *preparation) (*target, decision, error) {
	tg, d, err := t.decided(prep)
	if err == nil && t.nriOnly && d.targets() {
		_, why := t.nri.Usable()
		err = coded(codes.Unavailable, "container %q: targeting is configured to go through NRI only, and NRI is not usable: %s", prep.req.Name, why)
	}
	return tg, d, err
}

// decided waits for the preparation, and answers the target and what is
// decided before the container exists (decisionFor); or the caller's
// error, or strict mode's refusal of what already falls back.
func (t *targeter) decided(prep *preparation) (*target, decision, error) {
	tg, err := prep.wait()
	if err != nil {
		return nil, decision{}, err
	}
	d := decisionFor(prep.req, prep.p, tg)
	return tg, d, strictErr(&d, t.strict)
}

// settleNRI ends the wait for token's event, if any: a no-op once settled.
func (t *targeter) settleNRI(ctx context.Context, token string) {
	if token != "" {
		t.nri.Settle(ctx, token)
	}
}

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
func (t *targeter) forward(ctx, lctx context.Context, raw []byte, req criwire.Create, token string, ans *nriAnswer, fwd forwardFunc) (forwarded, error) {
	out, answered, refusal, err := t.send(ctx, lctx, raw, token, fwd)
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
		return t.retryWithoutNRI(ctx, lctx, raw, req, ans, err, fwd)
	}
	return forwarded{asked: ans != nil && ans.id != ""}, err
}

// send rewrites the request with token, forwards it, and settles token's
// event: whether it was answered on a live connection, and its refusal.
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
func (t *targeter) retryWithoutNRI(ctx, lctx context.Context, raw []byte, req criwire.Create, ans *nriAnswer, cause error, fwd forwardFunc) (forwarded, error) {
	if nriplugin.IsNamespaceRefusal(cause) {
		t.nri.Refuse(cause)
		t.log.WithError(cause).Warn("the runtime refused the NRI namespace adjustment; targeting through containerd's API from now on")
		out, _, _, err := t.send(ctx, lctx, raw, "", fwd)
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
	out, answered, _, err := t.send(ctx, lctx, raw, token, fwd)
	if answered {
		return forwarded{out: out, asked: true, d: &again.d, pointed: true, took: again.took}, err
	}
	return forwarded{out: out, asked: true, d: &d}, err
}

// firstFault is the answer to a create the backend failed (err): when
// containerd failed it before it asked the shim (its NRI event never
// came), the request's own fault (an unknown target, say, or strict mode's
// refusal) comes first, as when the shim prepares before it forwards.
func (t *targeter) firstFault(prep *preparation, token string, fw forwarded, err error) error {
	if token != "" && !fw.asked {
		if _, _, perr := t.decided(prep); perr != nil {
			return perr
		}
	}
	return err
}

// point has container id, which the backend made, pointed at what
// targeting decides (into d), and answers how its spec was written: by the
// NRI answer already (fw), or now through containerd's API, on the Update
// path (where tg and d were decided before the forward) and when the NRI
// event was not answered (then they are decided now, and a refusal removes
// what the backend made).
func (t *targeter) point(ctx context.Context, id string, fw forwarded, prep *preparation, tg *target, d *decision, pins *createPins) (string, error) {
	if fw.pointed {
		*d = *fw.d
		return ViaNRI, nil
	}
	if tg == nil {
		var err error
		if tg, *d, err = t.decided(prep); err != nil {
			return "", err
		}
	}
	if fw.d != nil {
		*d = *fw.d // the NRI answer's, with what it learnt
	} else {
		d.unconfirmed(tg, tg.confirm())
	}
	return ViaUpdate, t.pointSpec(ctx, id, d, tg, pins)
}

// pointSpec is the Update path: it decides, from d, with the spec the
// backend stored for container id (made in the pod's namespaces), and
// writes the decision into it. The pins are made once the spec is read,
// before it is written: nothing can join them before CreateContainer
// answers. An error means the container must not be kept.
func (t *targeter) pointSpec(ctx context.Context, id string, d *decision, tg *target, pins *createPins) error {
	var refusal error
	err := t.specs.EditSpec(ctx, id, func(spec *specs.Spec) ([]oci.Opt, error) {
		pt := decide(d, tg, viewOfSpec(spec), t.decideEnv(id, pins))
		if refusal = strictErr(d, t.strict); refusal != nil {
			return nil, refusal
		}
		return renderSpec(d, pt), nil
	})
	switch {
	case refusal != nil:
		return refusal
	case err != nil:
		return specNotWritten(d, err, t.strict)
	}
	return nil
}
