//go:build integration

package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	internalapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criclient "k8s.io/cri-client/pkg"
)

// Faults an operator lives through, with kubelet's own CRI client
// (k8s.io/cri-client, with its dial settings: reconnect backoff from 100 ms
// to 3 s, no keepalive) as the client: the shim restarted under it, and its
// container events stream across a shim restart and a containerd restart.

// kubeletClient is k8s.io/cri-client's RuntimeService on endpoint, made as
// kubelet makes it. It has no Close: like kubelet's, it lives as long as the
// process.
func kubeletClient(t *testing.T, endpoint string) internalapi.RuntimeService {
	t.Helper()
	// kubelet's client logs every failed call; the test reads the codes
	// itself, so the outage's dozens of lines are dropped
	ctx := logr.NewContext(context.Background(), logr.Discard())
	rt, err := criclient.NewRemoteRuntimeServiceBuilder().WithEndpoint(endpoint).
		WithConnectionTimeout(10 * time.Second).Build(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// The shim is restarted (SIGTERM, then started again) while kubelet's CRI
// client keeps calling it, as kubelet's relist does: a call in flight at
// SIGTERM finishes, the calls made while the shim is down fail with
// Unavailable and nothing else, and the same client object works again once
// the shim serves, within its reconnect backoff, without being recreated.
func TestShimRestartKubeletClient(t *testing.T) {
	s := startShim(t)
	p := runPod(t, shimCRI(s), podMode)
	app := run(t, shimCRI(s), p, "app", &runtimeapi.NamespaceOption{})
	rt := kubeletClient(t, s.Endpoint())

	type outcome struct {
		at  time.Time
		err error
	}
	var mu sync.Mutex
	var outcomes []outcome
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			_, err := rt.ListContainers(context.Background(), &runtimeapi.ContainerFilter{PodSandboxId: p.id})
			if err == nil {
				_, err = rt.ContainerStatus(context.Background(), app, false)
			}
			mu.Lock()
			outcomes = append(outcomes, outcome{time.Now(), err})
			mu.Unlock()
		}
	}()
	defer func() { close(done); wg.Wait() }()
	inFlight := make(chan error, 1)
	go func() {
		out, _, err := rt.ExecSync(context.Background(), app, []string{"sh", "-c", "sleep 1; echo finished"}, 10*time.Second)
		if err == nil && strings.TrimSpace(string(out)) != "finished" {
			err = fmt.Errorf("output %q", out)
		}
		inFlight <- err
	}()

	time.Sleep(500 * time.Millisecond) // calls answered, the exec in flight
	sigterm := time.Now()
	if err := s.Stop(); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	if err := <-inFlight; err != nil {
		t.Errorf("ExecSync in flight at SIGTERM: %v, want it finished", err)
	}
	time.Sleep(300 * time.Millisecond) // the shim is down
	if err := s.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	serving := time.Now()

	var back time.Time
	eventually(t, "the same kubelet client to be answered again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, o := range outcomes {
			if o.at.After(serving) && o.err == nil {
				back = o.at
				return true
			}
		}
		return false
	})
	time.Sleep(500 * time.Millisecond) // and it keeps working

	mu.Lock()
	defer mu.Unlock()
	var before, down, after int
	for _, o := range outcomes {
		switch {
		case o.err != nil && status.Code(o.err) != codes.Unavailable:
			t.Errorf("a call at %v from SIGTERM: %v, want Unavailable at worst", o.at.Sub(sigterm).Round(time.Millisecond), o.err)
		case o.err != nil:
			down++
		case o.at.Before(sigterm):
			before++
		case !o.at.Before(back):
			after++
		}
	}
	if before == 0 || down == 0 {
		t.Errorf("%d calls answered before SIGTERM, %d failed while the shim was down: the restart was not seen", before, down)
	}
	for _, o := range outcomes {
		if o.at.After(back) && o.err != nil {
			t.Errorf("a call %v after the client was answered again: %v", o.at.Sub(back).Round(time.Millisecond), o.err)
		}
	}
	if d := back.Sub(serving); d > 5*time.Second {
		t.Errorf("the client was answered again %v after the shim served: more than its 3 s backoff allows", d)
	}
	t.Logf("kubelet client: %d calls answered before SIGTERM, %d failed with Unavailable while the shim was down, %d answered after; shim down %v, client answered again %v after the shim served",
		before, down, after, serving.Sub(sigterm).Round(time.Millisecond), back.Sub(serving).Round(time.Millisecond))
}

// requireEvents skips a test that needs container events on containerd 1.6,
// which has none (GetContainerEvents answers Unimplemented; TestEventsParity
// checks the shim relays that).
func requireEvents(t *testing.T) {
	t.Helper()
	if ok, version := backendHasEvents(t); !ok {
		t.Skipf("containerd %s has no GetContainerEvents (it answers Unimplemented): there is no stream to carry across a restart", version)
	}
}

// kubeletSubscribe opens GetContainerEvents through kubelet's client, as its
// evented PLEG does, retrying while the endpoint answers Unavailable (for up
// to 10 s), and reads the stream into an eventLog until it ends.
func kubeletSubscribe(t *testing.T, ctx context.Context, name string, rt internalapi.RuntimeService) *eventLog {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for attempt := 1; ; attempt++ {
		l := &eventLog{name: name, done: make(chan struct{})}
		established := make(chan struct{})
		ch := make(chan *runtimeapi.ContainerEventResponse)
		go func() {
			for ev := range ch {
				l.mu.Lock()
				l.got = append(l.got, ev)
				l.mu.Unlock()
			}
		}()
		go func() {
			err := rt.GetContainerEvents(ctx, ch, func(runtimeapi.RuntimeService_GetContainerEventsClient) { close(established) })
			close(ch)
			l.mu.Lock()
			l.err = err
			l.mu.Unlock()
			close(l.done)
		}()
		select {
		case <-established:
			return l
		case <-l.done:
		}
		if status.Code(l.err) != codes.Unavailable || time.Now().After(deadline) {
			t.Fatalf("%s: GetContainerEvents (attempt %d): %v", name, attempt, l.err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// runEventful creates and starts a container directly in containerd (so that
// it does not depend on the shim), whose events a subscriber then awaits.
func runEventful(t *testing.T, name string) string {
	t.Helper()
	return run(t, direct, runPod(t, direct, podMode), name, &runtimeapi.NamespaceOption{})
}

var createdStarted = []runtimeapi.ContainerEventType{runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT}

// A GetContainerEvents stream through the shim, held by kubelet's client,
// when the shim is restarted: the stream ends with Unavailable, and the same
// client subscribes again once the shim serves and receives events. An open
// stream never ends by itself: the shim ends it when SIGTERM comes, so the
// shim stops at once rather than after --shutdown-timeout (10 s).
func TestEventsAcrossShimRestart(t *testing.T) {
	requireEvents(t)
	s := startShim(t)
	rt := kubeletClient(t, s.Endpoint())
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	before := kubeletSubscribe(t, sctx, "before the restart", rt)
	id := runEventful(t, "ev-before")
	n := len(before.waitFor(t, id, createdStarted...))
	sigterm := time.Now()
	if err := s.Stop(); err != nil {
		t.Fatalf("SIGTERM: %v", err)
	}
	stopped := time.Since(sigterm)
	if stopped > 5*time.Second {
		t.Errorf("the shim took %v to stop with an events stream open, want it ended at SIGTERM (not after --shutdown-timeout)", stopped)
	}
	if err := before.wait(t); status.Code(err) != codes.Unavailable {
		t.Errorf("the events stream at the shim's SIGTERM ended with %v, want Unavailable", err)
	}
	if err := s.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	after := kubeletSubscribe(t, sctx, "after the restart", rt)
	id2 := runEventful(t, "ev-after")
	m := len(after.waitFor(t, id2, createdStarted...))
	t.Logf("events of the container before the restart: %d; the stream ended with %v; the shim stopped %v after SIGTERM; after it: %d events of a new container, %d in all (containerd replays the last five minutes)",
		n, status.Code(before.err), stopped.Round(time.Millisecond), m, after.count())
}

// The same across a containerd restart (SIGTERM, started again) under a
// running shim: the stream through the shim ends with Unavailable, and the
// same kubelet client, through the same shim, subscribes again and receives
// events once containerd is back.
func TestEventsAcrossContainerdRestart(t *testing.T) {
	requireEvents(t)
	s := startShim(t)
	rt := kubeletClient(t, s.Endpoint())
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	before := kubeletSubscribe(t, sctx, "before the restart", rt)
	id := runEventful(t, "ev-before")
	n := len(before.waitFor(t, id, createdStarted...))
	if err := env.Containerd.Restart(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if err := before.wait(t); status.Code(err) != codes.Unavailable {
		t.Errorf("the events stream through the shim at containerd's restart ended with %v, want Unavailable", err)
	}
	eventually(t, "containerd's own CRI to answer the test client", func() bool {
		_, err := direct.Runtime.Version(ctx(t), &runtimeapi.VersionRequest{})
		return err == nil
	})
	after := kubeletSubscribe(t, sctx, "after the restart", rt)
	id2 := runEventful(t, "ev-after")
	m := len(after.waitFor(t, id2, createdStarted...))
	t.Logf("events of the container before containerd's restart: %d; the stream ended with %v (%s); after it: %d events of a new container",
		n, status.Code(before.err), status.Convert(before.err).Message(), m)
}
