package server

import (
	"context"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"

	"github.com/cri-nstarget/cri-nstarget/intents"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// createTargeted is createContainer for a request that asks for targeting
// (p), whose NRI event is to carry token, top to bottom: it starts
// preparing (resolving the target, opening its namespaces), records the
// intent, forwards the request with POD in place of TARGET, points the new
// container at pins of the target's namespaces, and reports. On the NRI
// path the request is forwarded as soon as the intent is recorded: the
// preparation goes on while containerd creates the container, and the
// answer to containerd's event for it waits for the preparation, and points
// it (or refuses it) inside containerd's create. On the Update path the
// preparation is waited for before anything is forwarded, and the spec is
// pointed after the create. Each acquisition is followed by its undo,
// deferred on retErr: a failed create leaves no container, no pin and no
// record (one the backend may have answered without its own answer, when
// the request was sent, is left to the reconciler).
func (t *targeter) createTargeted(ctx context.Context, req createRequest, token string, p *plan, fwd forwardFunc) (_ []byte, retErr error) {
	w := t.report.stopwatch()
	defer func() { t.report.refused(retErr) }()
	// The shim's own steps do not depend on the caller: one that gives up
	// after the backend made the container must not leave it half-made.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lateStepsTimeout)
	defer cancel()

	prep := t.prepare(ctx, lctx, req.Create, p)
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

	// Written down before anything is created, removed once the answer is
	// ready: a crash in between leaves a record that start-up reconciles.
	f, err := t.recon.begin(intents.Record{ID: intents.NewID(), Sandbox: req.SandboxID, Name: req.Name, Attempt: req.Attempt, Target: p.target})
	if err != nil {
		return nil, err
	}
	defer f.end()
	failpoint("create:recorded")
	w.lap("prepare_record")

	// The Update path prepares before anything is forwarded (first)
	fw, err := t.forward(ctx, lctx, req, token, t.answerTargeting(prep, pins), func() (err error) {
		tg, d, err = t.preparedFirst(prep)
		return err
	}, fwd)
	w.lap("forward")
	if err != nil {
		if fw.sent {
			f.unanswered(err)
		}
		return nil, t.firstFault(prep, fw, err)
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

// firstFault is the answer to a create the backend failed (err): when
// containerd failed it before it asked the shim (its NRI event never
// came), the request's own fault (an unknown target, say, or strict mode's
// refusal) comes first, as when the shim prepares before it forwards.
func (t *targeter) firstFault(prep *preparation, fw forwarded, err error) error {
	if fw.viaNRI && !fw.asked {
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
