package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// The floor of the plugin mode's measure: what NRI itself costs a create
// with a plugin attached that does nothing. NRI's stub subscribes a plugin
// to the events of the methods it has, so nullPlugin, with CreateContainer
// alone, makes containerd call it once in every create and wait for its
// empty answer (no adjustment); nullPostCreate has PostCreateContainer too,
// which containerd calls after it has made the container, and waits for as
// well. The plugin mode cannot go under the first, the floor of its
// creates: it subscribes to no other event of a create. The second is kept
// as a reference: what a PostCreateContainer subscription costs every
// create (the plugin mode's watcher had one until it asked containerd's
// metadata at StopContainer instead, nriplugin/watch.go).

// nullPlugin answers every CreateContainer with no adjustment.
type nullPlugin struct{ synced chan struct{} }

func (n *nullPlugin) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	select {
	case <-n.synced:
	default:
		close(n.synced)
	}
	return nil, nil
}

func (n *nullPlugin) CreateContainer(context.Context, *api.PodSandbox, *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	return nil, nil, nil
}

// nullPostCreate is nullPlugin subscribed to PostCreateContainer too.
type nullPostCreate struct{ *nullPlugin }

func (nullPostCreate) PostCreateContainer(context.Context, *api.PodSandbox, *api.Container) error {
	return nil
}

// startNullPlugin attaches a do-nothing NRI plugin to c (postCreate: also
// subscribed to PostCreateContainer), once containerd has synchronized it;
// Close detaches it.
func startNullPlugin(ctx context.Context, c *harness.Containerd, postCreate bool) (io.Closer, error) {
	n := &nullPlugin{synced: make(chan struct{})}
	var p any = n
	if postCreate {
		p = nullPostCreate{n}
	}
	st, err := stub.New(p, stub.WithPluginName("bench-null"), stub.WithPluginIdx("50"), stub.WithSocketPath(c.NRISocket()))
	if err != nil {
		return nil, fmt.Errorf("the do-nothing NRI plugin: %w", err)
	}
	if err := st.Start(ctx); err != nil {
		return nil, fmt.Errorf("the do-nothing NRI plugin: %w", err)
	}
	select {
	case <-n.synced:
	case <-time.After(10 * time.Second):
		st.Stop()
		return nil, fmt.Errorf("the do-nothing NRI plugin: not synchronized by containerd within 10s")
	}
	return stubCloser{st}, nil
}

type stubCloser struct{ st stub.Stub }

func (s stubCloser) Close() error { s.st.Stop(); return nil }

// floorRounds is a phase of o.control rounds with the do-nothing plugin
// attached to the first side (postCreate as startNullPlugin's), detached
// after.
func floorRounds(ctx context.Context, sides [2]*pluginSide, n int, postCreate bool) (phase, error) {
	p, err := startNullPlugin(ctx, sides[0].env.Containerd, postCreate)
	if err != nil {
		return phase{}, err
	}
	defer p.Close()
	return pluginRounds(ctx, sides, n, nil)
}
