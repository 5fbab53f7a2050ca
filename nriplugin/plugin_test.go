package nriplugin

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
)

func testPlugin(t *testing.T) *Plugin {
	t.Helper()
	p := New("/nonexistent/nri.sock", logrus.NewEntry(logrus.StandardLogger()), nil)
	p.set(true, "test: connected")
	return p
}

func nriContainer(id, sandbox, name, token string) *api.Container {
	c := &api.Container{Id: id, PodSandboxId: sandbox, Name: name}
	if token != "" {
		c.Annotations = map[string]string{AnnotationRequest: token}
	}
	return c
}

// The event of a container whose request the shim forwarded with a token
// gets that request's adjustment, once; any other container (no token, an
// unknown one, a token whose sandbox or name do not match) gets none. The
// request may name its sandbox by a prefix, as containerd takes it; the
// event names it in full.
func TestEventsGetOnlyTheirAdjustment(t *testing.T) {
	p := testPlugin(t)
	calls := 0
	adj := &api.ContainerAdjustment{}
	adj.AddOrReplaceNamespace(&api.LinuxNamespace{Type: "pid", Path: "/pins/c1/pid"})
	if !p.Expect("tok1", &Call{Sandbox: "sb", Name: "debug", Adjust: func(*api.Container) (*api.ContainerAdjustment, error) {
		calls++
		return adj, nil
	}}) {
		t.Fatal("expect refused on a usable connection")
	}
	for _, c := range []*api.Container{
		nriContainer("c0", "sb1", "debug", ""),        // not a TARGET create
		nriContainer("c0", "sb1", "debug", "unknown"), // a token the shim never gave
		nriContainer("c0", "xsb1", "debug", "tok1"),   // another pod's container with the token
		nriContainer("c0", "sb1", "other", "tok1"),    // another container's
	} {
		got, _, err := p.CreateContainer(context.Background(), nil, c)
		if got != nil || err != nil {
			t.Errorf("event for %+v: adjustment %v %v, want none", c, got, err)
		}
	}
	got, _, err := p.CreateContainer(context.Background(), nil, nriContainer("c1", "sb1", "debug", "tok1"))
	if got != adj || err != nil {
		t.Fatalf("the request's own event: %v %v", got, err)
	}
	if again, _, _ := p.CreateContainer(context.Background(), nil, nriContainer("c2", "sb1", "debug", "tok1")); again != nil {
		t.Error("a second event for the same token was adjusted")
	}
	if answered, err := p.Settle(context.Background(), "tok1"); !answered || err != nil {
		t.Errorf("settle = %v %v, want answered", answered, err)
	}
	if calls != 1 {
		t.Errorf("adjust ran %d times", calls)
	}
	if len(p.calls) != 0 {
		t.Errorf("calls left: %v", p.calls)
	}
}

// settle: an event that never came expires (a late one then gets nothing);
// an answer on a connection lost since does not count; a refusal is handed
// back.
func TestSettle(t *testing.T) {
	ctx := context.Background()
	p := testPlugin(t)
	never := func(*api.Container) (*api.ContainerAdjustment, error) {
		t.Error("adjust ran for an expired call")
		return nil, nil
	}
	p.Expect("late", &Call{Sandbox: "sb", Name: "n", Adjust: never})
	if answered, _ := p.Settle(ctx, "late"); answered {
		t.Error("a call without its event settled as answered")
	}
	if got, _, _ := p.CreateContainer(ctx, nil, nriContainer("c", "sb", "n", "late")); got != nil {
		t.Error("a late event was adjusted")
	}

	p.Expect("lost", &Call{Sandbox: "sb", Name: "n", Adjust: func(*api.Container) (*api.ContainerAdjustment, error) {
		return &api.ContainerAdjustment{}, nil
	}})
	p.CreateContainer(ctx, nil, nriContainer("c", "sb", "n", "lost"))
	p.set(false, "test: connection lost")
	p.set(true, "test: connected again")
	if answered, _ := p.Settle(ctx, "lost"); answered {
		t.Error("an answer on a lost connection settled as answered")
	}

	refusal := errors.New("strict targeting: no")
	p.Expect("refused", &Call{Sandbox: "sb", Name: "n", Adjust: func(*api.Container) (*api.ContainerAdjustment, error) {
		return nil, refusal
	}})
	if _, _, err := p.CreateContainer(ctx, nil, nriContainer("c", "sb", "n", "refused")); !errors.Is(err, refusal) {
		t.Errorf("event answered %v, want the refusal", err)
	}
	if _, err := p.Settle(ctx, "refused"); !errors.Is(err, refusal) {
		t.Errorf("settle = %v, want the refusal", err)
	}
}

// An event being answered when the create returns is waited for.
func TestSettleWaitsForTheAnswer(t *testing.T) {
	p := testPlugin(t)
	release := make(chan struct{})
	p.Expect("slow", &Call{Sandbox: "sb", Name: "n", Adjust: func(*api.Container) (*api.ContainerAdjustment, error) {
		<-release
		return &api.ContainerAdjustment{}, nil
	}})
	go p.CreateContainer(context.Background(), nil, nriContainer("c", "sb", "n", "slow"))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		p.mu.Lock()
		claimed := p.calls["slow"].state == callClaimed
		p.mu.Unlock()
		if claimed {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the event never claimed the call")
		}
	}
	go func() { time.Sleep(20 * time.Millisecond); close(release) }()
	if answered, _ := p.Settle(context.Background(), "slow"); !answered {
		t.Error("settle did not wait for the answer")
	}
}

// Not connected, or refused by the runtime: no call is registered, and the
// path says update and why.
func TestUsable(t *testing.T) {
	p := testPlugin(t)
	if usable, why := p.Usable(); !usable {
		t.Errorf("connected: not usable (%s)", why)
	}
	p.Refuse(errors.New("validation error: attempted restricted namespace adjustment by plugin(s) cri-nstarget"))
	if usable, why := p.Usable(); usable || why == "" {
		t.Errorf("refused: usable %v (%s)", usable, why)
	}
	if p.Expect("t", &Call{}) {
		t.Error("expect accepted a call while NRI is refused")
	}
	p.set(false, "lost")
	p.set(true, "connected again")
	if usable, why := p.Usable(); !usable {
		t.Errorf("reconnected: not usable (%s), want usable again", why)
	}
	if !IsNamespaceConflict(errors.New(`rpc error: code = Unknown desc = failed to create containerd container: failed to get NRI adjustment for container: plugins "50-cri-nstarget" and "10-nri-sample" both tried to set Namespace pid`)) {
		t.Error("NRI's conflict between two plugins not recognised")
	}
	if IsNamespaceConflict(errors.New(`plugins "10-a" and "20-b" both tried to set Namespace pid`)) {
		t.Error("a conflict between two other plugins taken for the shim's")
	}
	if !IsNamespaceRefusal(errors.New("rpc error: code = Unknown desc = failed to create containerd container: validation error: attempted restricted namespace adjustment by plugin(s) \"50-cri-nstarget\"")) {
		t.Error("the default validator's refusal not recognised")
	}
}

// The create's context ends while its NRI event is being answered (adjust
// is still writing the create's outcome): settle must not hand the outcome
// back before the answer is done, or both goroutines write it at once (the
// race detector reports it; without it, the answer is seen unfinished).
func TestSettleWaitsForAnAnswerInProgress(t *testing.T) {
	p := testPlugin(t)
	owned := map[string]string{} // the create's, as its targeting outcome is
	in, release := make(chan struct{}), make(chan struct{})
	var done atomic.Bool
	if !p.Expect("tok", &Call{Sandbox: "sb1", Name: "debug", Adjust: func(*api.Container) (*api.ContainerAdjustment, error) {
		close(in)
		<-release
		owned["pid"] = "targeted" // as the shim's answer writes the outcome
		done.Store(true)
		return nil, nil
	}}) {
		t.Fatal("expect refused")
	}
	go p.CreateContainer(context.Background(), nil, nriContainer("c1", "sb1", "debug", "tok"))
	<-in
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the create's late steps are out of time
	go func() {
		time.Sleep(100 * time.Millisecond)
		close(release)
	}()
	answered, err := p.Settle(ctx, "tok")
	if !done.Load() {
		t.Fatal("settle returned while the NRI answer was still writing the create's outcome")
	}
	// the handler owns the outcome again
	owned["pid"] = "fallback"
	if !answered || err != nil {
		t.Errorf("answered %v, %v: the answer finished on a live connection", answered, err)
	}
}
