package nriplugin

import (
	"context"
	"fmt"
	"time"

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
	// Exists tells whether containerd's own metadata (its containers API,
	// not its CRI) has container id, within ctx (short: containerd waits).
	Exists(ctx context.Context, id string) (bool, error)
}

// existsTimeout bounds Exists at a StopContainer: containerd waits for the
// answer, and takes a plugin that lets NRI's request timeout (2 s by
// default) pass for gone.
const existsTimeout = 500 * time.Millisecond

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

// watching is p in the plugin mode: its events go to its watcher. It has
// no PostCreateContainer on purpose: containerd waits for each event a
// plugin subscribes to, on every create of the node, TARGET or not (one
// more round trip, about +0.4 ms at the median: docs/reports/benchmarks.md);
// an undone create is told from an ordinary stop by containerd's metadata
// instead (undone).
type watching struct{ *Plugin }

func (w watching) Synchronize(ctx context.Context, pods []*api.PodSandbox, ctrs []*api.Container) ([]*api.ContainerUpdate, error) {
	w.watcher.Synchronized(pods, ctrs)
	return w.Plugin.Synchronize(ctx, pods, ctrs)
}

// CreateContainer is the watcher's answer, while containerd has not been
// seen refusing it (refused); an answer that adjusts namespaces leaves the
// container pending (adjusting) until it starts, stops or is removed.
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

// StopContainer comes first in containerd's undo of a create (its
// UndoCreateContainer: StopContainer, then RemoveContainer): an undone
// create whose namespaces the plugin adjusted is containerd refusing the
// adjustment (undone).
func (w watching) StopContainer(ctx context.Context, pod *api.PodSandbox, c *api.Container) ([]*api.ContainerUpdate, error) {
	if undone := w.undone(ctx, pod, c); undone != nil {
		w.Refuse(undone)
		w.watcher.Refused(undone)
	}
	return nil, nil
}

// PostStartContainer: a container started was made, whatever the plugin
// answered its create with.
func (w watching) PostStartContainer(_ context.Context, pod *api.PodSandbox, c *api.Container) error {
	w.settled(c.GetId())
	w.watcher.Started(pod, c)
	return nil
}

func (w watching) RemoveContainer(_ context.Context, _ *api.PodSandbox, c *api.Container) error {
	w.settled(c.GetId()) // pending no more
	w.watcher.Removed(c)
	return nil
}

func (w watching) RemovePodSandbox(_ context.Context, pod *api.PodSandbox) error {
	w.watcher.PodRemoved(pod)
	return nil
}

// adjusting records that the plugin answered container id's create with a
// namespace adjustment: until it starts, containerd may still undo the
// create.
func (p *Plugin) adjusting(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pending == nil {
		p.pending = map[string]bool{}
	}
	p.pending[id] = true
}

// settled: container id's create is no longer pending (started, stopped, or
// removed). It tells whether it was.
func (p *Plugin) settled(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	pending := p.pending[id]
	delete(p.pending, id)
	return pending
}

// undone is what was seen when containerd stops container c whose create
// the plugin answered with a namespace adjustment, and which never started:
// nil for any other container. containerd's undo of a create deletes the
// container from its metadata before it tells NRI plugins, or never wrote
// it there (the adjustment refused inside its NewContainer); an ordinary
// stop, or a failed start's, comes while the container is there. So the
// watcher asks containerd's metadata: no container is an undone create; one
// is an ordinary stop; no answer is not taken for either, and said.
func (w watching) undone(ctx context.Context, pod *api.PodSandbox, c *api.Container) error {
	if !w.settled(c.GetId()) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, existsTimeout)
	defer cancel()
	exists, err := w.watcher.Exists(ctx, c.GetId())
	switch {
	case err != nil:
		w.log.WithError(err).WithField("container", c.GetId()).Warn("containerd stops a container whose create the plugin adjusted, before its start, " +
			"and its metadata did not answer whether it has it: whether containerd undid the create (refusing the adjustment) cannot be told; taken for an ordinary stop")
		return nil
	case exists:
		return nil
	}
	return fmt.Errorf("containerd undid its create of container %s (pod %s/%s) after the plugin's answer adjusted its namespaces "+
		"(StopContainer came before its start, and containerd's metadata does not have it): it refuses namespace adjustments "+
		"(as NRI's default validator does with reject_namespace_adjustment = true)", c.GetId(), pod.GetNamespace(), pod.GetName())
}

// isRefused tells whether the runtime was seen refusing a namespace
// adjustment on this connection.
func (p *Plugin) isRefused() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.refused
}
