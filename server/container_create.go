package server

import (
	"context"
	"fmt"
	"sync"

	nriapi "github.com/containerd/nri/pkg/api"
	"google.golang.org/grpc/codes"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/intents"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// tokenAnnotation is the NRI token's annotation, none for no token.
func tokenAnnotation(token string) []criwire.Annotation {
	if token == "" {
		return nil
	}
	return []criwire.Annotation{{Key: annotationRequest, Value: token}}
}

// createContainer handles CreateContainer, read off the wire (criwire):
// requests with neither TARGET nor an unknown NamespaceMode, and bytes that
// are not protobuf, go to the backend byte for byte. Otherwise the target
// is resolved and its namespaces opened before anything is created, the
// request is forwarded with POD in place of TARGET, and the new container's
// spec is pointed at pins of the target's namespaces.
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
	o, err := t.prepare(ctx, req, p)
	if err != nil {
		return nil, err
	}
	defer o.close()
	defer func() {
		if o.pinning != "" {
			t.pinning.done(o.pinning)
		}
	}()
	if err := t.strictErr(o); err != nil {
		return nil, err
	}
	// The NRI path: the request carries a token, and the answer to
	// containerd's NRI event for the container it makes points it at the
	// pins (adjust). checkPID is set below, before anything can call it.
	var checkPID func() error
	token := ""
	if t.nri != nil && len(o.handles) > 0 {
		token = newToken()
		call := &nriCall{sandbox: o.sandbox, name: o.name, adjust: func(c *nriapi.Container) (*nriapi.ContainerAdjustment, error) {
			return t.adjust(c, o, checkPID)
		}}
		if !t.nri.expect(token, call) {
			token = ""
		}
	}
	if t.nriOnly && token == "" && len(o.handles) > 0 {
		_, why := t.nri.path()
		return nil, coded(codes.Unavailable, "container %q: targeting is configured to go through NRI only, and NRI is not usable: %s", o.name, why)
	}
	// TARGET (and unknown modes) become POD, with the token if any;
	// everything else reaches the backend as it came.
	b, err := criwire.RewriteCreate(raw, tokenAnnotation(token)...)
	if err != nil {
		if token != "" {
			t.nri.settle(ctx, token)
		}
		return nil, fmt.Errorf("rewrite CreateContainerRequest: %w", err)
	}
	// Written down before anything is created, removed once the answer is
	// ready: a crash in between leaves a record that start-up reconciles.
	in := intents.Record{ID: intents.NewID(), Sandbox: req.SandboxID, Name: o.name, Attempt: req.Attempt, Target: o.rec.Target}
	if err := t.begin(in); err != nil {
		return nil, err
	}
	kept := false // the record stays for the reconciler
	defer func() { t.end(in.ID, kept) }()
	failpoint("create:recorded")

	// The pid the namespaces were opened through is confirmed with
	// containerd while the backend creates the container: nothing joins
	// them before CreateContainer answers, and the answer waits for it.
	// From here on the shim's own steps do not depend on the caller: a
	// caller that gives up after the backend made the container must not
	// leave it half-made.
	lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), lateStepsTimeout)
	defer cancel()
	confirmed := make(chan error, 1)
	if len(o.handles) > 0 {
		go func() { confirmed <- t.confirmPID(lctx, o.rec.Target, o.pid) }()
	} else {
		confirmed <- nil
	}
	// Whichever path asks first turns an unconfirmed pid into fallbacks.
	checkPID = sync.OnceValue(func() error {
		err := <-confirmed
		if err != nil {
			o.unconfirmed(err)
		}
		return err
	})
	out, err := fwd(ctx, b)
	viaNRI := false
	if token != "" {
		answered, refusal := t.nri.settle(lctx, token)
		switch {
		case err == nil:
			viaNRI = answered
		case refusal != nil:
			// adjust refused (strict): containerd made nothing
			return nil, refusal
		case answered && (isNamespaceRefusal(err) || isNamespaceConflict(err)):
			// containerd failed the create for our adjustment: nothing was
			// made, the pins go, and the create goes again.
			if o.held {
				t.releasePins(o.heldFor)
				o.held = false
			}
			recordOnly := false
			if isNamespaceRefusal(err) {
				// The runtime refuses namespace adjustments (NRI's
				// validator, by configuration): this create again through
				// the Update path, and every other until NRI reconnects.
				t.nri.refuse(err)
				t.log.WithError(err).Warn("the runtime refused the NRI namespace adjustment; targeting through containerd's API from now on")
			} else {
				// Another NRI plugin sets a namespace this create targets,
				// and NRI fails a create two plugins adjust alike. That
				// plugin wins: the targeted namespaces fall back (strict:
				// refused), and our answer is the record alone.
				for kind, r := range o.rec.Namespaces {
					if r.Result == oci.Targeted {
						o.fallBack(kind, "create", reasonNRIConflict, codes.FailedPrecondition,
							fmt.Sprintf("another NRI plugin sets this container's namespaces too, and wins (%v)", err))
					}
				}
				if serr := t.strictErr(o); serr != nil {
					return nil, serr
				}
				recordOnly = true
			}
			out, viaNRI, err = t.forwardAgain(ctx, lctx, raw, o, fwd, recordOnly)
			if !recordOnly {
				token = "" // forwarded without one: the Update path is the plan
			}
		}
	}
	if err != nil {
		if o.held {
			// pinned in the NRI event, then the backend failed the create
			t.releasePins(o.heldFor)
		}
		if !answered(err) {
			// the backend may have made it after all: the reconciler
			// removes whatever it finds under this name and attempt
			kept = true
		}
		return nil, err
	}
	id, err := criwire.ContainerID(out)
	if err != nil || id == "" {
		return nil, fmt.Errorf("container %q: backend CreateContainer answered without a container id (%v)", o.name, err)
	}
	in.Container = id
	if err := t.intents.Put(in); err != nil {
		t.log.WithError(err).WithField("container", id).Warn("intent record: the container id could not be added; the reconciler finds it by name")
	}
	failpoint("create:forwarded")
	if viaNRI {
		// pointed inside containerd's CreateContainer: nothing to write
		t.report(id, o)
		failpoint("create:finished")
		return out, nil
	}
	if token != "" {
		t.log.WithField("container", id).Warn("the NRI event for this container was not answered on a live connection; pointing its spec through containerd's API")
	}
	if err := checkPID(); err != nil {
		if err := t.strictErr(o); err != nil {
			kept = !t.discard(lctx, in)
			return nil, err
		}
	}
	if err := t.finish(lctx, id, o); err != nil {
		kept = !t.discard(lctx, in)
		return nil, err
	}
	failpoint("create:finished")
	return out, nil
}

// forwardAgain forwards the request raw again after containerd failed it
// for an NRI adjustment, without the token, or (recordOnly) with a new one
// whose event is answered with the record alone (every namespace o targeted
// fell back). It reports whether that answer was applied; if not, the Update
// path writes what is left to write.
func (t *targeter) forwardAgain(ctx, lctx context.Context, raw []byte, o *outcome, fwd forwardFunc, recordOnly bool) ([]byte, bool, error) {
	token := ""
	if recordOnly {
		token = newToken()
		call := &nriCall{sandbox: o.sandbox, name: o.name, adjust: func(*nriapi.Container) (*nriapi.ContainerAdjustment, error) {
			o.rec.Via = ViaNRI
			rec, err := o.rec.Encode()
			if err != nil {
				return nil, err
			}
			adj := &nriapi.ContainerAdjustment{}
			adj.AddAnnotation(oci.AnnotationTargeting, rec)
			return adj, nil
		}}
		if !t.nri.expect(token, call) {
			token = ""
		}
	}
	b, err := criwire.RewriteCreate(raw, tokenAnnotation(token)...)
	if err != nil {
		return nil, false, fmt.Errorf("rewrite CreateContainerRequest: %w", err)
	}
	out, err := fwd(ctx, b)
	answered := false
	if token != "" {
		answered, _ = t.nri.settle(lctx, token)
	}
	return out, answered, err
}
