package nriplugin

import (
	"context"

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

func (w watching) CreateContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	adj, err := w.watcher.Create(pod, c)
	return adj, nil, err
}

func (w watching) PostStartContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) error {
	w.watcher.Started(pod, c)
	return nil
}

func (w watching) RemoveContainer(_ context.Context, _ *api.PodSandbox, c *api.Container) error {
	w.watcher.Removed(c)
	return nil
}

func (w watching) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	w.watcher.PodRemoved(pod)
	return nil
}
