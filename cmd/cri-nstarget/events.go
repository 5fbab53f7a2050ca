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
	opts := events.Options{Kubeconfig: cfg.EventsKubeconfig, UserAgent: "cri-nstarget/" + currentBuild().Version, Log: log}
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

// Post hands the server's Event to the sender, whose Event has the same
// fields.
func (p *podEvents) Post(e server.Event) { p.s.Post(events.Event(e)) }

// close posts what is queued until ctx ends, then drops the rest.
func (p *podEvents) close(ctx context.Context) {
	if p != nil {
		p.s.Close(ctx)
	}
}
