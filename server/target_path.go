package server

import (
	"google.golang.org/grpc/codes"
)

// path is how one try of a targeted create points its container, chosen
// before the request is forwarded (choosePath), and each try chooses it
// again: the retry after a conflict, or after the runtime refused NRI's
// namespace adjustments, takes whatever path is chosen then.
type path int

const (
	// pathNRI: the create's answer to containerd's NRI event is
	// registered; the request is forwarded with its token, and the answer
	// points the container inside containerd's create (createViaNRI).
	pathNRI path = iota
	// pathUpdate: the request is forwarded as it would be without NRI, and
	// the container pointed through containerd's API after
	// (createViaUpdate).
	pathUpdate
	// pathRefuse: nothing is forwarded; the create fails with the
	// decision's error (the caller's, or strict mode's refusal), or because
	// targeting is configured to go through NRI only and NRI is not usable.
	pathRefuse
)

func (p path) String() string {
	switch p {
	case pathNRI:
		return ViaNRI
	case pathUpdate:
		return ViaUpdate
	case pathRefuse:
		return "refuse"
	}
	return "unknown"
}

// pathFor is the path of a try, from what is known before its forward:
// whether its NRI answer is registered (NRI usable now), whether targeting
// goes through NRI only, and, when not registered, the decision made before
// the container exists (decided: its error; targets: whether it has
// namespaces to join).
func pathFor(registered, nriOnly, targets bool, decided error) path {
	switch {
	case registered:
		return pathNRI
	case decided != nil, nriOnly && targets:
		return pathRefuse
	}
	return pathUpdate
}

// choosePath chooses the path of c's next try (pathFor): NRI when its
// answer a is registered; otherwise the decision is waited for, and an
// error is the refusal. NRI only and NRI not usable: Unavailable, when
// there are namespaces to join.
func (t *targeter) choosePath(c *create, a *nriAnswer) (path, error) {
	registered := c.token != "" && t.expect(c, a)
	var d decision
	var err error
	if !registered {
		_, d, err = c.dec.decided()
	}
	p := pathFor(registered, t.nriOnly, d.targets(), err)
	if p == pathRefuse && err == nil {
		_, why := t.nri.Usable()
		err = coded(codes.Unavailable, "container %q: targeting is configured to go through NRI only, and NRI is not usable: %s", c.req.Name, why)
	}
	return p, err
}
