package main

import (
	"context"

	"github.com/sirupsen/logrus"

	conf "github.com/cri-nstarget/cri-nstarget/config"
	"github.com/cri-nstarget/cri-nstarget/events"
	"github.com/cri-nstarget/cri-nstarget/server"
)

// podEvents posts the targeting Events on pods (events_kubeconfig). A nil
// *podEvents is "events off": its methods do nothing.
type podEvents struct{ s *events.Sink }

// newEvents starts the sender of events_kubeconfig's identity; none when it
// is empty. The kubeconfig is read when the first event is due.
func newEvents(cfg conf.Config, log *logrus.Entry, mx *metricsEndpoint) *podEvents {
	if cfg.EventsKubeconfig == "" {
		log.Info("events: off (events_kubeconfig is empty)")
		return nil
	}
	opts := events.Options{Kubeconfig: cfg.EventsKubeconfig, UserAgent: "cri-nstarget/" + currentBuild().Version, Node: cfg.NodeName, Log: log}
	if mx != nil {
		opts.Metrics = mx.rec
	}
	return &podEvents{s: events.New(opts)}
}

// sink is server.Options.Events: nil when events are off.
func (p *podEvents) sink() server.EventSink {
	if p == nil {
		return nil
	}
	return p
}

// Post hands the server's Event, about a pod, to the sender.
func (p *podEvents) Post(e server.Event) {
	p.s.Post(events.Event{Pod: e.Pod, Container: e.Container, Warning: e.Warning, Reason: e.Reason, Message: e.Message})
}

// reasonPluginUnsupported is the Warning on the node where the plugin mode
// can do nothing.
const reasonPluginUnsupported = "PluginUnsupported"

// pluginUnsupported is the Event on the node when the plugin mode, having
// tried containerd's NRI once, found it unusable (via is not NRI's), and
// why: NRI off, a containerd older than 2.2, a pin it cannot make (its
// trial pin at the start, or its pins' names unreachable), or
// (pluginRefused) a containerd seen refusing its namespace adjustments. The plugin then does
// nothing but try again (retries, and its readiness, say the rest).
func pluginUnsupported(via, why string) (events.Event, bool) {
	if via == server.ViaNRI {
		return events.Event{}, false
	}
	return events.Event{Node: true, Warning: true, Reason: reasonPluginUnsupported,
		Message: "cri-nstarget (mode plugin) does nothing on this node: " + why +
			"; containerd makes debug containers as it would without it (TARGET unpinned). It needs containerd 2.2 or later, with NRI on and namespace adjustments allowed (no reject_namespace_adjustment in NRI's default_validator), and a pod that may mount its pins (deploy/plugin's)."}, true
}

// pluginRefused is server.Options.Refused: the plugin mode, connected, saw
// containerd refuse its namespace adjustments (why): a Warning on the node
// says so, as pluginUnsupported.
func (p *podEvents) pluginRefused(why string) {
	if e, ok := pluginUnsupported("none", why); ok { // "none": the plugin mode's path while refused
		p.postNode(e)
	}
}

// postNode hands an Event about the node to the sender.
func (p *podEvents) postNode(e events.Event) {
	if p != nil {
		p.s.Post(e)
	}
}

// close posts what is queued until ctx ends, then drops the rest.
func (p *podEvents) close(ctx context.Context) {
	if p != nil {
		p.s.Close(ctx)
	}
}
