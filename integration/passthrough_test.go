//go:build integration

package integration

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/critesting"
)

// (g) One set of assertions, run against containerd directly and through the
// shim.
func TestPassthrough(t *testing.T) {
	s := startShim(t)
	for _, tc := range []struct {
		name string
		c    critesting.CRI
	}{{"direct", direct}, {"shim", shimCRI(s)}} {
		t.Run(tc.name, func(t *testing.T) { checkLifecycle(t, tc.c) })
	}
}

func checkLifecycle(t *testing.T, c critesting.CRI) {
	v, err := c.Runtime.Version(ctx(t), &runtimeapi.VersionRequest{})
	if err != nil || v.GetRuntimeName() != "containerd" || v.GetRuntimeApiVersion() != "v1" {
		t.Fatalf("Version = %v, %v", v, err)
	}

	// Read the stream from now on, as kubelet does, and never block
	// (see eventLog).
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := subscribe(t, sctx, "events", c)

	p := runPod(t, c, podMode)
	id := run(t, c, p, "life", &runtimeapi.NamespaceOption{})

	l, err := c.Runtime.ListContainers(ctx(t), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: p.id}})
	if err != nil || len(l.GetContainers()) != 1 || l.GetContainers()[0].GetId() != id {
		t.Errorf("ListContainers = %v, %v", l, err)
	}
	st, err := c.Runtime.ContainerStatus(ctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil || st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_RUNNING {
		t.Errorf("ContainerStatus = %v, %v", st, err)
	}
	if out := execIn(t, c, id, "echo", "hello"); out != "hello" {
		t.Errorf("ExecSync = %q", out)
	}
	ex, err := c.Runtime.Exec(ctx(t), &runtimeapi.ExecRequest{ContainerId: id, Cmd: []string{"sh"}, Stdout: true})
	if err != nil {
		t.Fatal(err)
	}
	if u, err := url.Parse(ex.GetUrl()); err != nil || u.Hostname() != "127.0.0.1" || !strings.HasPrefix(u.Path, "/exec/") {
		t.Errorf("Exec URL = %q: want containerd's streaming server", ex.GetUrl())
	}

	// the events stream saw the container's creation and start, where the
	// backend has container events (containerd 1.7+); containerd 1.6 answers
	// Unimplemented, which TestEventsParity checks the shim relays as it is
	if hasEvents, version := backendHasEvents(t); hasEvents {
		events.waitFor(t, id, runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT, runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT)
	} else if err := events.wait(t); status.Code(err) != codes.Unimplemented {
		t.Errorf("events on containerd %s: %v, want Unimplemented", version, err)
	}

	_, err = c.Runtime.ContainerStatus(ctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: "0000000000000000000000000000000000000000000000000000000000000000"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("ContainerStatus of unknown id: %v, want NotFound", err)
	}

	if _, err := c.Runtime.StopContainer(ctx(t), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Runtime.RemoveContainer(ctx(t), &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Runtime.StopPodSandbox(ctx(t), &runtimeapi.StopPodSandboxRequest{PodSandboxId: p.id}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Runtime.RemovePodSandbox(ctx(t), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.id}); err != nil {
		t.Fatal(err)
	}

	// images: remove, pull again, list, status
	spec := &runtimeapi.ImageSpec{Image: env.BusyboxImage}
	if _, err := c.Images.RemoveImage(ctx(t), &runtimeapi.RemoveImageRequest{Image: spec}); err != nil {
		t.Fatal(err)
	}
	if st, err := c.Images.ImageStatus(ctx(t), &runtimeapi.ImageStatusRequest{Image: spec}); err != nil || st.GetImage() != nil {
		t.Errorf("ImageStatus after remove = %v, %v", st, err)
	}
	pulled, err := c.Images.PullImage(ctx(t), &runtimeapi.PullImageRequest{Image: spec})
	if err != nil {
		t.Fatal(err)
	}
	imgs, err := c.Images.ListImages(ctx(t), &runtimeapi.ListImagesRequest{})
	found := false
	for _, im := range imgs.GetImages() {
		found = found || im.GetId() == pulled.GetImageRef()
	}
	if err != nil || !found {
		t.Errorf("ListImages lacks %s: %v", pulled.GetImageRef(), err)
	}
	st2, err := c.Images.ImageStatus(ctx(t), &runtimeapi.ImageStatusRequest{Image: spec})
	if err != nil || st2.GetImage().GetId() != pulled.GetImageRef() {
		t.Errorf("ImageStatus = %v, %v", st2, err)
	}
	if _, err := c.Images.PullImage(ctx(t), &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: env.Registry.Ref("nst/missing:1")}}); status.Code(err) == codes.OK {
		t.Error("pull of a missing image succeeded")
	}
}

// The same bytes come back from containerd directly and through the shim.
func TestPassthroughSameBytes(t *testing.T) {
	s := startShim(t)
	for _, call := range []func(c critesting.CRI) (proto.Message, error){
		func(c critesting.CRI) (proto.Message, error) {
			return c.Runtime.Version(ctx(t), &runtimeapi.VersionRequest{})
		},
		func(c critesting.CRI) (proto.Message, error) {
			return c.Images.ImageStatus(ctx(t), &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: env.PauseImage}, Verbose: true})
		},
	} {
		a, err1 := call(direct)
		b, err2 := call(shimCRI(s))
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		ab, _ := proto.MarshalOptions{Deterministic: true}.Marshal(a)
		bb, _ := proto.MarshalOptions{Deterministic: true}.Marshal(b)
		if string(ab) != string(bb) {
			t.Errorf("direct and shim answers differ:\n%v\n%v", a, b)
		}
	}
}

// backendHasEvents reports whether the containerd under test serves
// GetContainerEvents (1.7 and later; 1.6 answers Unimplemented), and its
// version.
func backendHasEvents(t *testing.T) (bool, string) {
	t.Helper()
	v, err := direct.Runtime.Version(ctx(t), &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	version := v.GetRuntimeVersion()
	var major, minor int
	if _, err := fmt.Sscanf(strings.TrimPrefix(version, "v"), "%d.%d", &major, &minor); err != nil {
		t.Fatalf("containerd version %q: %v", version, err)
	}
	return major > 1 || major == 1 && minor >= 7, version
}

// GetContainerEvents through the shim delivers what containerd delivers.
// Containerd 1.6 has no container events: there both answer Unimplemented,
// with the same message. On 1.7 the two streams share the events between
// them (splitEvents). On 2.x events must flow to each: two streams,
// one direct and one through the shim, subscribed at once, both receive the
// events of one container's creation, start and stop, and they are the same
// messages in the same order. (A stream that only ran into the caller's
// deadline on both sides would show nothing.)
func TestEventsParity(t *testing.T) {
	s := startShim(t)
	hasEvents, version := backendHasEvents(t)
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sides := []*eventLog{subscribe(t, sctx, "direct", direct), subscribe(t, sctx, "shim", shimCRI(s))}
	if !hasEvents {
		a, b := status.Convert(sides[0].wait(t)), status.Convert(sides[1].wait(t))
		if a.Code() != codes.Unimplemented || b.Code() != a.Code() || b.Message() != a.Message() {
			t.Errorf("containerd %s: direct %v %q; shim %v %q; want Unimplemented both ways, the same message", version, a.Code(), a.Message(), b.Code(), b.Message())
		}
		t.Logf("containerd %s has no GetContainerEvents: direct and shim both answer %v %q", version, b.Code(), b.Message())
		return
	}

	// the events come from containerd; the shim only relays them
	p := runPod(t, direct, podMode)
	id := run(t, direct, p, "events", &runtimeapi.NamespaceOption{})
	if _, err := direct.Runtime.StopContainer(ctx(t), &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	want := []runtimeapi.ContainerEventType{runtimeapi.ContainerEventType_CONTAINER_CREATED_EVENT,
		runtimeapi.ContainerEventType_CONTAINER_STARTED_EVENT, runtimeapi.ContainerEventType_CONTAINER_STOPPED_EVENT}
	if !backendBroadcastsEvents(t) {
		// containerd 1.7 hands each event to one subscriber: every
		// GetContainerEvents reads the one channel the events go to
		// (containerd#7318), so two streams split them. What the shim relays
		// is what containerd hands its stream: between the two sides every
		// event of the container arrives, and none twice.
		splitEvents(t, version, id, sides, want)
		return
	}
	var got [2][]*runtimeapi.ContainerEventResponse
	for i, side := range sides {
		got[i] = side.waitFor(t, id, want...)
	}
	if len(got[0]) != len(got[1]) {
		t.Fatalf("events of %s: %d direct, %d through the shim", id, len(got[0]), len(got[1]))
	}
	for i := range got[0] {
		if !proto.Equal(got[0][i], got[1][i]) {
			t.Errorf("event %d of %s differs:\ndirect %v\nshim   %v", i, id, got[0][i], got[1][i])
		}
	}
	t.Logf("containerd %s: %d events of the container received and compared on each side (%d and %d events in all, other containers' included)",
		version, len(got[0]), sides[0].count(), sides[1].count())
}

// backendBroadcastsEvents: containerd 2.x sends every container event to
// every GetContainerEvents subscriber; 1.7 hands each to one of them.
func backendBroadcastsEvents(t *testing.T) bool {
	t.Helper()
	v, err := direct.Runtime.Version(ctx(t), &runtimeapi.VersionRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var major int
	if _, err := fmt.Sscanf(strings.TrimPrefix(v.GetRuntimeVersion(), "v"), "%d.", &major); err != nil {
		t.Fatalf("containerd version %q: %v", v.GetRuntimeVersion(), err)
	}
	return major >= 2
}

// splitEvents waits up to 20 s until the two sides together have received
// each event of want for container id, and fails t if one arrived on both
// (or twice on one) or some never did.
func splitEvents(t *testing.T, version, id string, sides []*eventLog, want []runtimeapi.ContainerEventType) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		seen := map[runtimeapi.ContainerEventType][]string{}
		for _, side := range sides {
			for _, ev := range side.of(id) {
				seen[ev.GetContainerEventType()] = append(seen[ev.GetContainerEventType()], side.name)
			}
		}
		all := true
		for _, w := range want {
			all = all && len(seen[w]) > 0
		}
		if all {
			for _, w := range want {
				if len(seen[w]) != 1 {
					t.Errorf("containerd %s: %v of %.12s received %d times (%v), want once", version, w, id, len(seen[w]), seen[w])
				}
			}
			t.Logf("containerd %s hands each event to one subscriber: the events of %.12s went to %v", version, id, seen)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("containerd %s: the events %v of %.12s did not all arrive, direct and through the shim together, within 20 s; had %v", version, want, id, seen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// of is what the stream received of container id so far.
func (l *eventLog) of(id string) []*runtimeapi.ContainerEventResponse {
	l.mu.Lock()
	defer l.mu.Unlock()
	var of []*runtimeapi.ContainerEventResponse
	for _, ev := range l.got {
		if ev.GetContainerId() == id {
			of = append(of, ev)
		}
	}
	return of
}

// eventLog reads a GetContainerEvents stream to its end, never blocking
// the sender (containerd 2.x delivers to each subscriber in turn, so one that
// stops reading stalls every call that emits an event).
type eventLog struct {
	name string
	mu   sync.Mutex
	got  []*runtimeapi.ContainerEventResponse
	err  error         // how the stream ended
	done chan struct{} // closed when it ended
}

func subscribe(t *testing.T, ctx context.Context, name string, c critesting.CRI) *eventLog {
	t.Helper()
	l := &eventLog{name: name, done: make(chan struct{})}
	stream, err := c.Runtime.GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
	if err != nil {
		l.err = err
		close(l.done)
		return l
	}
	go func() {
		defer close(l.done)
		for {
			ev, err := stream.Recv()
			l.mu.Lock()
			if err != nil {
				l.err = err
				l.mu.Unlock()
				return
			}
			l.got = append(l.got, ev)
			l.mu.Unlock()
		}
	}()
	return l
}

// wait is how the stream ended, within 10 s.
func (l *eventLog) wait(t *testing.T) error {
	t.Helper()
	select {
	case <-l.done:
		return l.err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: the events stream is still open after 10 s", l.name)
		return nil
	}
}

func (l *eventLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.got)
}

// waitFor waits up to 20 s for events of container id of each type in
// want, and returns the events of id received by then.
func (l *eventLog) waitFor(t *testing.T, id string, want ...runtimeapi.ContainerEventType) []*runtimeapi.ContainerEventResponse {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		l.mu.Lock()
		var of []*runtimeapi.ContainerEventResponse
		seen := map[runtimeapi.ContainerEventType]bool{}
		for _, ev := range l.got {
			if ev.GetContainerId() == id {
				of = append(of, ev)
				seen[ev.GetContainerEventType()] = true
			}
		}
		err := l.err
		l.mu.Unlock()
		all := true
		for _, w := range want {
			all = all && seen[w]
		}
		switch {
		case all:
			return of
		case err != nil:
			t.Fatalf("%s: the events stream ended (%v) before the events %v of %s; had %v", l.name, err, want, id, seen)
		case time.Now().After(deadline):
			t.Fatalf("%s: no events %v of %s within 20 s; had %v", l.name, want, id, seen)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
