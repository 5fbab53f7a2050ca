package nriplugin

import (
	"context"
	"strings"
	"testing"

	"github.com/containerd/nri/pkg/api"
)

// fakeWatcher answers every create with adj, and counts what it is told.
type fakeWatcher struct {
	adj     *api.ContainerAdjustment
	creates int
	refused []error
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

// In the plugin mode, containerd undoing a create whose namespaces the
// plugin adjusted (StopContainer, then RemoveContainer, and no
// PostCreateContainer: its UndoCreateContainer, as when NRI's default
// validator refuses the adjustment) makes the plugin refused: not usable,
// saying what was seen, the watcher told once, and no create answered
// after it (containerd's own). A create that was made, or that the plugin
// did not adjust, stopped later, is no refusal; a new connection clears it.
func TestUndoneAdjustmentRefuses(t *testing.T) {
	ctx := context.Background()
	pin := &api.ContainerAdjustment{}
	pin.AddOrReplaceNamespace(&api.LinuxNamespace{Type: "pid", Path: "/pins/c/pid"})
	f := &fakeWatcher{adj: pin}
	p := testPlugin(t)
	p.Watch(f)
	w := p.stubPlugin().(watching)
	pod := &api.PodSandbox{Id: "sb", Namespace: "ns", Name: "pod"}
	create := func(id string) {
		t.Helper()
		if adj, _, err := w.CreateContainer(ctx, pod, &api.Container{Id: id}); adj != f.adj || err != nil {
			t.Fatalf("create %s: %v %v, want the watcher's answer", id, adj, err)
		}
	}
	create("made")
	w.PostCreateContainer(ctx, pod, &api.Container{Id: "made"})
	w.StopContainer(ctx, pod, &api.Container{Id: "made"}) // stopped after it ran
	f.adj = nil
	create("untouched")
	w.StopContainer(ctx, pod, &api.Container{Id: "untouched"})
	if usable, why := p.Usable(); !usable || len(f.refused) != 0 {
		t.Fatalf("after creates made or not adjusted: usable %v (%s), refusals %v", usable, why, f.refused)
	}
	f.adj = pin
	create("undone")
	w.StopContainer(ctx, pod, &api.Container{Id: "undone"})
	w.RemoveContainer(ctx, pod, &api.Container{Id: "undone"})
	usable, why := p.Usable()
	if usable || !strings.Contains(why, "containerd undid its create of container undone (pod ns/pod)") || len(f.refused) != 1 {
		t.Fatalf("after an undone adjusted create: usable %v (%s), refusals %v; want refused, saying so, once", usable, why, f.refused)
	}
	if adj, _, err := w.CreateContainer(ctx, pod, &api.Container{Id: "later"}); adj != nil || err != nil || f.creates != 3 {
		t.Errorf("a create after the refusal: %v %v (watcher asked %d times), want containerd's own", adj, err, f.creates)
	}
	p.set(false, "lost")
	p.set(true, "connected again")
	if usable, why := p.Usable(); !usable {
		t.Errorf("reconnected: not usable (%s)", why)
	}
}
