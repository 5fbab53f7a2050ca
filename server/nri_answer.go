package server

import (
	"time"

	nriapi "github.com/containerd/nri/pkg/api"

	"github.com/cri-nstarget/cri-nstarget/nriplugin"
)

// nriAnswer is one create's answer to containerd's NRI CreateContainer
// event for the container it makes, and what the answer leaves. It is
// written by the answer, on the NRI stub's goroutine, from the event's
// claim until the answer returns, and read by the create only once
// nriplugin's Settle has returned, which waits for the answer: it has one
// writer at a time, as the pins the answer takes (createPins) do.
type nriAnswer struct {
	id   string        // the container the event was for; "" if none came
	d    decision      // what the answer decided, and rendered
	took time.Duration // how long the answer took (within the forward)
}

// answerFunc answers an event (c) into a.
type answerFunc func(a *nriAnswer, c *nriapi.Container) (*nriapi.ContainerAdjustment, error)

// expectNRI registers with the NRI plugin a create whose request carries
// token and names sandbox (in full, or as a unique prefix) and the container
// name: containerd's event for the container it makes is answered by
// answer. It returns the answer's state; nil without a token, or when NRI is
// not usable now (the Update path). A token settled is registered again for
// the create's next try.
func (t *targeter) expectNRI(token, sandbox, name string, answer answerFunc) *nriAnswer {
	if token == "" {
		return nil
	}
	a := &nriAnswer{}
	adjust := func(c *nriapi.Container) (*nriapi.ContainerAdjustment, error) {
		defer func(start time.Time) { a.took = time.Since(start) }(time.Now())
		a.id = c.GetId()
		return answer(a, c)
	}
	if !t.nri.Expect(token, &nriplugin.Call{Sandbox: sandbox, Name: name, Adjust: adjust}) {
		return nil
	}
	return a
}

// answerTargeting answers the event of the container the backend makes for
// the TARGET create prep prepares for: it waits for the preparation (its
// error refuses the create, so containerd makes nothing) and for the
// target's pid to be confirmed, decides with the event's copy of the
// container's spec, taking the pins into pins, and renders the decision as
// the adjustment that containerd applies inside its CreateContainer. A
// fallback is answered with its record; strict mode's refusal refuses the
// create.
func (t *targeter) answerTargeting(prep *preparation, pins *createPins) answerFunc {
	return func(a *nriAnswer, c *nriapi.Container) (*nriapi.ContainerAdjustment, error) {
		failpoint("create:nri-event")
		tg, err := prep.wait()
		if err != nil {
			return nil, err
		}
		a.d = decisionFor(prep.req, prep.p, tg)
		a.d.unconfirmed(tg, tg.confirm())
		if err := strictErr(&a.d, t.strict); err != nil {
			return nil, err
		}
		pt := decide(&a.d, tg, viewOfNRI(c), t.decideEnv(a.id, pins))
		if err := strictErr(&a.d, t.strict); err != nil {
			return nil, err
		}
		return renderNRI(&a.d, pt)
	}
}

// answerRecord answers with d's record alone: the container joins nothing
// of the target's.
func answerRecord(d decision) answerFunc {
	return func(a *nriAnswer, _ *nriapi.Container) (*nriapi.ContainerAdjustment, error) {
		a.d = d
		return renderNRI(&a.d, pointing{})
	}
}
