package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	nriapi "github.com/containerd/nri/pkg/api"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/intents"
	"github.com/cri-nstarget/cri-nstarget/nriplugin"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// createContainer handles CreateContainer, read off the wire (criwire):
// requests with neither TARGET nor an unknown NamespaceMode, and bytes that
// are not protobuf, go to the backend byte for byte. Otherwise it prepares
// (resolves the target, opens its namespaces), records the intent,
// forwards the request with POD in place of TARGET, points the new
// container at pins of the target's namespaces (inside the backend's create
// through NRI, or after it through the spec), and reports. Each step's undo
// follows it: a failed create leaves no container, no pin and no record.
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

// createTargeted is createContainer for a request that asks for targeting (p).
func (t *targeter) createTargeted(ctx context.Context, req criwire.Create, p *plan, raw []byte, fwd forwardFunc) (_ []byte, retErr error) {
	w := t.report.stopwatch()
	o, err := t.prepare(ctx, req, p)
	if err != nil {
		return nil, err
	}
	defer o.close()
	if err := t.strictErr(o); err != nil {
		return nil, err
	}
	// The shim's own steps do not depend on the caller: one that gives up
	// after the backend made the container must not leave it half-made.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lateStepsTimeout)
	defer cancel()
	confirm := t.confirmation(lctx, o)
	token, err := t.expectNRI(o, func(c *nriapi.Container) (*nriapi.ContainerAdjustment, error) {
		return t.answerNRI(c, o, confirm)
	})
	if err != nil {
		return nil, err
	}
	defer t.doneNRI(lctx, token, o)
	// Written down before anything is created, removed once the answer is
	// ready: a crash in between leaves a record that start-up reconciles.
	f, err := t.recon.begin(intents.Record{ID: intents.NewID(), Sandbox: req.SandboxID, Name: o.name, Attempt: req.Attempt, Target: o.rec.Target})
	if err != nil {
		return nil, err
	}
	defer f.end()
	failpoint("create:recorded")
	w.lap("prepare_record")
	out, viaNRI, err := t.forward(ctx, lctx, raw, o, token, fwd)
	w.lap("forward")
	if err != nil {
		f.unanswered(err)
		return nil, err
	}
	id, err := f.made(out)
	if err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil && !t.recon.discard(lctx, f.record) {
			f.handOver() // marked for discarding: the reconciler removes it
		}
	}()
	failpoint("create:forwarded")
	if !viaNRI {
		if err := t.pointSpec(lctx, id, o, confirm); err != nil {
			return nil, err
		}
	}
	w.lap("point")
	t.report.outcome(id, o)
	t.report.steps(id, o, w)
	failpoint("create:finished")
	return out, nil
}

// confirmation confirms with containerd, while the backend creates the
// container, that the pid o's namespaces were opened through is still the
// target's: nothing joins them before CreateContainer answers, and the
// answer waits for it. The function it returns waits for the confirmation
// (once; either path may ask first) and turns an unconfirmed pid into
// fallbacks.
func (t *targeter) confirmation(ctx context.Context, o *outcome) func() error {
	if len(o.handles) == 0 {
		return func() error { return nil }
	}
	target, pid := o.rec.Target, o.pid
	confirmed := make(chan error, 1)
	go func() { confirmed <- t.confirmPID(ctx, target, pid) }()
	return sync.OnceValue(func() error {
		err := <-confirmed
		if err != nil {
			o.unconfirmed(err)
		}
		return err
	})
}

// expectNRI registers the create with the NRI plugin, whose answer to the
// event of the container it makes is answer, and returns the token its
// request is to carry: "" for the Update path (no namespace to join, or NRI
// not usable now). Configured for NRI only, a create with namespaces to join
// is refused while NRI is not usable.
func (t *targeter) expectNRI(o *outcome, answer func(*nriapi.Container) (*nriapi.ContainerAdjustment, error)) (string, error) {
	if t.nri == nil || len(o.handles) == 0 {
		return "", nil
	}
	token := nriplugin.NewToken()
	if t.nri.Expect(token, &nriplugin.Call{Sandbox: o.sandbox, Name: o.name, Adjust: answer}) {
		return token, nil
	}
	if t.nriOnly {
		_, why := t.nri.Usable()
		return "", coded(codes.Unavailable, "container %q: targeting is configured to go through NRI only, and NRI is not usable: %s", o.name, why)
	}
	return "", nil
}

// doneNRI ends a create's use of NRI: the wait for token's event, if its
// request was never sent (a no-op once settled), and the mark on the pins
// made in that event (the backend lists their container now, or never will).
func (t *targeter) doneNRI(ctx context.Context, token string, o *outcome) {
	if token == "" {
		return
	}
	t.nri.Settle(ctx, token)
	if o.pinning != "" {
		t.recon.pinning.done(o.pinning)
	}
}

// forward sends the request to the backend, TARGET (and unknown modes)
// rewritten as POD, with token if any, and reports whether the container
// was pointed inside the backend's create (its NRI event was answered).
// When containerd fails the create for the shim's adjustment, the create
// goes again (retryWithoutNRI).
func (t *targeter) forward(ctx, lctx context.Context, raw []byte, o *outcome, token string, fwd forwardFunc) ([]byte, bool, error) {
	out, answered, refusal, err := t.send(ctx, lctx, raw, token, fwd)
	switch {
	case err == nil:
		if token != "" && !answered {
			t.log.WithField("name", o.name).Warn("the NRI event for this container was not answered on a live connection; pointing its spec through containerd's API")
		}
		return out, answered, nil
	case refusal != nil:
		// the answer refused (strict): containerd made nothing
		return nil, false, refusal
	case answered && (nriplugin.IsNamespaceRefusal(err) || nriplugin.IsNamespaceConflict(err)):
		return t.retryWithoutNRI(ctx, lctx, raw, o, err, fwd)
	}
	if o.held {
		// pinned in the NRI event, then the backend failed the create
		t.releasePins(o.pinning)
		o.held = false
	}
	return nil, false, err
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
// the shim's NRI adjustment (cause): nothing was made, and the pins go.
//   - The runtime refuses namespace adjustments (NRI's validator, by
//     configuration): this create goes through the Update path, and every
//     other until NRI reconnects.
//   - Another NRI plugin sets a namespace this create targets, and NRI fails
//     a create two plugins adjust alike: that plugin wins. The targeted
//     namespaces fall back (strict: refused), and the event is answered with
//     the record alone.
func (t *targeter) retryWithoutNRI(ctx, lctx context.Context, raw []byte, o *outcome, cause error, fwd forwardFunc) ([]byte, bool, error) {
	if o.held {
		t.releasePins(o.pinning)
		o.held = false
	}
	if nriplugin.IsNamespaceRefusal(cause) {
		t.nri.Refuse(cause)
		t.log.WithError(cause).Warn("the runtime refused the NRI namespace adjustment; targeting through containerd's API from now on")
		out, _, _, err := t.send(ctx, lctx, raw, "", fwd)
		return out, false, err
	}
	o.fallBackTargeted(reasonNRIConflict, codes.FailedPrecondition,
		fmt.Sprintf("another NRI plugin sets this container's namespaces too, and wins (%v)", cause))
	if err := t.strictErr(o); err != nil {
		return nil, false, err
	}
	token := nriplugin.NewToken()
	if !t.nri.Expect(token, &nriplugin.Call{Sandbox: o.sandbox, Name: o.name, Adjust: func(*nriapi.Container) (*nriapi.ContainerAdjustment, error) {
		o.rec.Via = ViaNRI
		return nriAdjustment(pointing{}, o.rec)
	}}) {
		token = ""
	}
	out, answered, _, err := t.send(ctx, lctx, raw, token, fwd)
	return out, answered, err
}

// answerNRI answers containerd's NRI CreateContainer event for c, the
// container the backend is making for o: it waits for the target's pid to
// be confirmed, pins, decides and renders the decision as an adjustment,
// which containerd applies inside its CreateContainer. An error (strict
// mode) makes containerd refuse the create: nothing is left, no pin either.
// It runs on the NRI stub's goroutine and owns o until it returns.
func (t *targeter) answerNRI(c *nriapi.Container, o *outcome, confirm func() error) (*nriapi.ContainerAdjustment, error) {
	failpoint("create:nri-event")
	defer func(start time.Time) { o.answerTook = time.Since(start) }(time.Now())
	id := c.GetId()
	confirm()
	o.rec.Via = ViaNRI
	if o.pinsWanted() {
		t.recon.pinning.add(id) // until the create returns (o.pinning)
		o.pinning = id
	}
	pinErr := t.pin(id, o)()
	p, err := t.decide(id, viewOfNRI(c), o, pinErr)
	if err != nil {
		return nil, err
	}
	adj, err := nriAdjustment(p, o.rec)
	if err != nil {
		t.releasePins(id)
		return nil, err
	}
	o.held = len(p.ns) > 0
	return adj, nil
}

// pointSpec is the Update path: it pins, decides and renders the decision
// into the stored spec of container id, which the backend made in the pod's
// namespaces. The pins are made while the spec is read: their paths follow
// from the id, and nothing can join them before CreateContainer answers. An
// error means the container must not be kept.
func (t *targeter) pointSpec(ctx context.Context, id string, o *outcome, confirm func() error) error {
	confirm()
	o.rec.Via = ViaUpdate
	pinned := t.pin(id, o)
	var refusal error
	err := t.specs.EditSpec(ctx, id, func(spec *specs.Spec) ([]oci.Opt, error) {
		p, err := t.decide(id, viewOfSpec(spec), o, pinned())
		if err != nil {
			refusal = err
			return nil, err
		}
		return specOpts(p, o.rec), nil
	})
	pinned() // the callback may not have run (the spec was not read)
	switch {
	case refusal != nil:
		return refusal
	case err != nil:
		return t.specNotWritten(id, o, err)
	}
	return nil
}

// pin pins o's namespaces for container id, in the background; the function
// it returns waits for that (once) and says whether it failed. On failure
// nothing stays pinned.
func (t *targeter) pin(id string, o *outcome) func() error {
	if !o.pinsWanted() {
		return func() error { return nil }
	}
	held := make(chan error, 1)
	if err := t.setPinPaths(id, o); err != nil {
		held <- err
	} else {
		hs := o.handles
		go func() { held <- t.pins.Hold(id, hs) }()
	}
	return sync.OnceValue(func() error { return <-held })
}
