package server

import (
	"time"

	nriapi "github.com/containerd/nri/pkg/api"

	"github.com/cri-nstarget/cri-nstarget/nriplugin"
)

// expect registers a with the NRI plugin for c: containerd's event for the
// container c's request makes, which names its sandbox (in full, or as a
// unique prefix) and its name, and carries its token, is answered by a.
// False when NRI is not usable now. A token settled is registered again
// for the create's next try.
func (t *targeter) expect(c *create, a *nriAnswer) bool {
	return t.nri.Expect(c.token, &nriplugin.Call{Sandbox: c.req.SandboxID, Name: c.req.Name, Adjust: a.adjust})
}

// nriAnswer is one create's answer to containerd's NRI CreateContainer
// event for the container it makes, and what the answer leaves. It is
// written by the answer (adjust), on the NRI stub's goroutine, from the
// event's claim until the answer returns, and read by the create only once
// nriplugin's Settle has returned, which waits for the answer: it has one
// writer at a time, as the pins the answer takes (createPins) do.
type nriAnswer struct {
	t *targeter
	c *create

	id   string        // the container the event was for; "" if none came
	d    decision      // what the answer decided, and rendered
	took time.Duration // how long the answer took (within the forward)
}

// adjust answers the event of the container the backend makes (ctr): it
// takes the create's decision (decider: made once, the preparation waited
// for; its error refuses the create, so containerd makes nothing), decides
// with the event's copy of the container's spec, taking the pins
// (decideContainer), and renders the decision as the adjustment that
// containerd applies inside its CreateContainer. A fallback (after a
// conflict, every namespace) is answered with its record; strict mode's
// refusal refuses the create.
func (a *nriAnswer) adjust(ctr *nriapi.Container) (_ *nriapi.ContainerAdjustment, err error) {
	defer func(start time.Time) { a.took = time.Since(start) }(time.Now())
	a.id = ctr.GetId()
	failpoint("create:nri-event")
	var tg *target
	if tg, a.d, err = a.c.dec.decided(); err != nil {
		return nil, err
	}
	return a.t.answerNRI(&a.d, tg, ctr, a.c.pins)
}

// answerNRI is the one NRI answer of both modes (the proxy's nriAnswer, the
// plugin mode's pluginMode.answer), for the container containerd is making
// (ctr), once d was decided before it existed (decider): d is finished with
// the event's copy of the spec, taking the pins into pins (decideContainer,
// the Update path's decision too), and rendered as the adjustment containerd
// applies inside its create (renderNRI). A fallback is answered with its
// record; strict mode's refusal is the error, which fails the create.
func (t *targeter) answerNRI(d *decision, tg *target, ctr *nriapi.Container, pins *createPins) (*nriapi.ContainerAdjustment, error) {
	pt, err := t.decideContainer(d, tg, viewOfNRI(ctr), t.decideEnv(ctr.GetId(), pins))
	if err != nil {
		return nil, err
	}
	return renderNRI(d, pt)
}
