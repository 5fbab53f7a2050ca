package nriplugin

import (
	"context"
	"fmt"

	"github.com/containerd/nri/pkg/api"
)

// Watcher is the plugin mode's side of the connection (cri-nstarget with
// mode = "plugin": no CRI socket, containerd's own CRI serves the kubelet):
// it is told of every container, not only of the creates a proxied request
// announced with a token. containerd sends each event holding its own
// locks, and waits for the answer: each method must be quick, and must not
// call containerd's CRI lifecycle methods (CreateContainer, RemoveContainer,
// ...) itself; what is slow goes on elsewhere.
type Watcher interface {
	// Synchronized hands over the pods and containers containerd has once
	// it has configured the plugin, at every connection.
	Synchronized(pods []*api.PodSandbox, ctrs []*api.Container)
	// Create answers containerd's CreateContainer event for ctr, in pod:
	// the adjustment containerd applies inside its create, or the error
	// that fails it.
	Create(pod *api.PodSandbox, ctr *api.Container) (*api.ContainerAdjustment, error)
	// Started: ctr's task was started (PostStartContainer), with its pid.
	Started(pod *api.PodSandbox, ctr *api.Container)
	// Removed: ctr is removed (RemoveContainer); PodRemoved: pod is
	// (RemovePodSandbox).
	Removed(ctr *api.Container)
	PodRemoved(pod *api.PodSandbox)
	// Refused: containerd undid the create of a container whose namespaces
	// the plugin had adjusted (undone); the plugin adjusts nothing more
	// until its next connection (Usable says why).
	Refused(undone error)
}

// Watch makes p a plugin of the plugin mode: every container's events go
// to w, and no token is expected. Called once, before Run.
func (p *Plugin) Watch(w Watcher) { p.watcher = w }

// stubPlugin is what p registers with NRI's stub: p itself, whose events
// are Synchronize and CreateContainer; or, in the plugin mode, p with the
// events the watcher needs too (the stub subscribes to the events of the
// methods it finds).
func (p *Plugin) stubPlugin() any {
	if p.watcher == nil {
		return p
	}
	return watching{p}
}

// watching is p in the plugin mode: its events go to its watcher.
type watching struct{ *Plugin }

func (w watching) Synchronize(ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	w.watcher.Synchronized(pods, ctrs)
	return w.Plugin.Synchronize(ctx, pods, ctrs)
}

// CreateContainer is the watcher's answer, while containerd has not been
// seen refusing it (refused); an answer that adjusts namespaces is awaited
// at PostCreateContainer (adjusting).
func (w watching) CreateContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	if w.isRefused() {
		return nil, nil, nil
	}
	adj, err := w.watcher.Create(pod, c)
	if err == nil && len(adj.GetLinux().GetNamespaces()) > 0 {
		w.adjusting(c.GetId())
	}
	return adj, nil, err
}

// PostCreateContainer: containerd made the container, with the answer.
func (w watching) PostCreateContainer(_ context.Context, _ *api.PodSandbox, c *api.Container) error {
	w.made(c.GetId())
	return nil
}

// StopContainer comes first in containerd's undo of a create (its
// UndoCreateContainer: StopContainer, then RemoveContainer, with no
// PostCreateContainer before): an undone create whose namespaces the plugin
// adjusted is containerd refusing the adjustment.
func (w watching) StopContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) ([]*api.ContainerUpdate, error) {
	if undone := w.undone(pod, c); undone != nil {
		w.Refuse(undone)
		w.watcher.Refused(undone)
	}
	return nil, nil
}

func (w watching) PostStartContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) error {
	w.watcher.Started(pod, c)
	return nil
}

func (w watching) RemoveContainer(_ context.Context, _ *api.PodSandbox, c *api.Container) error {
	w.made(c.GetId()) // awaited no more
	w.watcher.Removed(c)
	return nil
}

func (w watching) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	w.watcher.PodRemoved(pod)
	return nil
}

// adjusting records that the plugin answered container id's create with a
// namespace adjustment: until PostCreateContainer, containerd may still
// undo the create.
func (p *Plugin) adjusting(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending == nil {
		p.pending = map[string]bool{}
	}
	p.pending[id] = true
}

// made: container id's create is no longer pending (made, or removed).
func (p *Plugin) made(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pending, id)
}

// undone is what was seen when containerd stops container c whose create
// the plugin answered with a namespace adjustment and which containerd never
// made: nil for any other container.
func (p *Plugin) undone(pod *api.PodSandbox, c *api.Container) error {
	p.mu.Lock()
	pending := p.pending[c.GetId()]
	delete(p.pending, c.GetId())
	p.mu.Unlock()
	if !pending {
		return nil
	}
	return fmt.Errorf("containerd undid its create of container %s (pod %s/%s) after the plugin's answer adjusted its namespaces "+
		"(StopContainer came, PostCreateContainer did not): it refuses namespace adjustments "+
		"(as NRI's default validator does with reject_namespace_adjustment = true)", c.GetId(), pod.GetNamespace(), pod.GetName())
}

// isRefused tells whether the runtime was seen refusing a namespace
// adjustment on this connection.
func (p *Plugin) isRefused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}
