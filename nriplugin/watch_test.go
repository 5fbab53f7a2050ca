package nriplugin

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
)

// fakeWatcher answers every create with adj, containerd's metadata with
// exists (and existsErr), and counts what it is told and asked.
type fakeWatcher struct {
	adj       *api.ContainerAdjustment
	exists    map[string]bool
	existsErr error
	creates   int
	refused   []error
	asked     []string
	deadlines []time.Duration // how long each Exists had, from its call
}

func (f *fakeWatcher) Synchronized([]*api.PodSandbox, []*api.Container) {}
func (f *fakeWatcher) Create(*api.PodSandbox, *api.Container) (*api.ContainerAdjustment, error) {
	f.creates++
	return f.adj, nil
}
func (f *fakeWatcher) Started(*api.PodSandbox, *api.Container) {}
func (f *fakeWatcher) Removed(*api.Container)                  {}
func (f *fakeWatcher) PodRemoved(*api.PodSandbox)              {}
func (f *fakeWatcher) Refused(undone error)                    { f.refused = append(f.refused, undone) }
func (f *fakeWatcher) Exists(ctx context.Context, id string) (bool, error) {
	f.asked = append(f.asked, id)
	if dl, ok := ctx.Deadline(); ok {
		f.deadlines = append(f.deadlines, time.Until(dl))
	} else {
		f.deadlines = append(f.deadlines, -1)
	}
	return f.exists[id], f.existsErr
}

func pinAdjustment() *api.ContainerAdjustment {
	pin := &api.ContainerAdjustment{}
	pin.AddOrReplaceNamespace(&api.LinuxNamespace{Type: "pid", Path: "/pins/c/pid"})
	return pin
}

// In the plugin mode, containerd undoing a create whose namespaces the
// plugin adjusted (its UndoCreateContainer: StopContainer, then
// RemoveContainer, after the container left containerd's metadata or
// never entered it, as when NRI's default validator refuses the
// adjustment) makes the plugin refused: not usable, saying what was seen,
// the watcher told once, and no create answered after it (containerd's
// own). A new connection clears it.
func TestUndoneAdjustmentRefuses(t *testing.T) {
	ctx := context.Background()
	f := &fakeWatcher{adj: pinAdjustment()}
	p := testPlugin(t)
	p.Watch(f)
	w := p.stubPlugin().(watching)
	pod := &api.PodSandbox{Id: "sb", Namespace: "ns", Name: "pod"}
	if adj, _, err := w.CreateContainer(ctx, pod, &api.Container{Id: "undone"}); adj != f.adj || err != nil {
		t.Fatalf("create: %v %v, want the watcher's answer", adj, err)
	}
	w.StopContainer(ctx, pod, &api.Container{Id: "undone"}) // containerd's metadata has no "undone"
	w.RemoveContainer(ctx, pod, &api.Container{Id: "undone"})
	usable, why := p.Usable()
	if usable || !strings.Contains(why, "containerd undid its create of container undone (pod ns/pod)") || len(f.refused) != 1 {
		t.Fatalf("after an undone adjusted create: usable %v (%s), refusals %v; want refused, saying so, once", usable, why, f.refused)
	}
	if adj, _, err := w.CreateContainer(ctx, pod, &api.Container{Id: "later"}); adj != nil || err != nil || f.creates != 1 {
		t.Errorf("a create after the refusal: %v %v (watcher asked %d times), want containerd's own", adj, err, f.creates)
	}
	p.set(false, "lost")
	p.set(true, "connected again")
	if usable, why := p.Usable(); !usable {
		t.Errorf("reconnected: not usable (%s)", why)
	}
}

// A stop that is not containerd undoing an adjusted create is no refusal:
// containerd's metadata is asked only at the stop of a container whose
// create the plugin adjusted and that never started, bounded, and only its
// NotFound is taken for an undone create; no answer is not.
func TestStopIsNoRefusal(t *testing.T) {
	cases := []struct {
		desc      string
		adjusted  bool
		started   bool // PostStartContainer before the stop
		exists    bool
		existsErr error
		asked     bool
		refused   bool
	}{
		{desc: "undone: adjusted, never started, not in containerd's metadata", adjusted: true, asked: true, refused: true},
		{desc: "adjusted, never started, in containerd's metadata (a stop, or a failed start)", adjusted: true, exists: true, asked: true},
		{desc: "adjusted, never started, containerd's metadata does not answer", adjusted: true, existsErr: errors.New("containerd: Unavailable"), asked: true},
		{desc: "adjusted, started, then stopped", adjusted: true, started: true},
		{desc: "not adjusted, never started", exists: false},
	}
	for _, tc := range cases {
		t.Run(tc.desc, func(t *testing.T) {
			ctx := context.Background()
			f := &fakeWatcher{exists: map[string]bool{"c": tc.exists}, existsErr: tc.existsErr}
			if tc.adjusted {
				f.adj = pinAdjustment()
			}
			p := testPlugin(t)
			p.Watch(f)
			w := p.stubPlugin().(watching)
			pod := &api.PodSandbox{Id: "sb", Namespace: "ns", Name: "pod"}
			c := &api.Container{Id: "c"}
			w.CreateContainer(ctx, pod, c)
			if tc.started {
				w.PostStartContainer(ctx, pod, c)
			}
			w.StopContainer(ctx, pod, c)
			w.StopContainer(ctx, pod, c) // a second stop asks nothing more
			if asked := len(f.asked) == 1; asked != tc.asked || len(f.asked) > 1 {
				t.Errorf("containerd's metadata asked %v, want asked once: %v", f.asked, tc.asked)
			}
			for _, d := range f.deadlines {
				if d < 0 || d > existsTimeout {
					t.Errorf("containerd's metadata asked with %v left, want a deadline within %v", d, existsTimeout)
				}
			}
			usable, why := p.Usable()
			if refused := len(f.refused) == 1 && !usable; refused != tc.refused || len(f.refused) > 1 {
				t.Errorf("refusals %v, usable %v (%s); want refused: %v", f.refused, usable, why, tc.refused)
			}
		})
	}
}

// The plugin mode subscribes to no PostCreateContainer (containerd would
// wait for it on every create of the node), and to the events that tell a
// create pending no more (its start, stop, removal).
func TestWatchingSubscriptions(t *testing.T) {
	p := testPlugin(t)
	p.Watch(&fakeWatcher{})
	sp := p.stubPlugin()
	if _, ok := sp.(stub.PostCreateContainerInterface); ok {
		t.Error("the plugin mode subscribes to PostCreateContainer")
	}
	_, stop := sp.(stub.StopContainerInterface)
	_, start := sp.(stub.PostStartContainerInterface)
	_, remove := sp.(stub.RemoveContainerInterface)
	if !stop || !start || !remove {
		t.Errorf("subscribed to StopContainer %v, PostStartContainer %v, RemoveContainer %v; want all", stop, start, remove)
	}
}
