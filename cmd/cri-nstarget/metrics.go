package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cri-nstarget/cri-nstarget/metrics"
	"github.com/cri-nstarget/cri-nstarget/server"
)

// metricsEndpoint serves Prometheus /metrics and /healthz on
// --metrics-address. A nil *metricsEndpoint is "metrics off": its methods
// do nothing.
type metricsEndpoint struct {
	rec  *metrics.Recorder
	lis  net.Listener
	http *http.Server
}

// listenMetrics binds addr before anything serves, so that a bad or busy
// address fails the start. An empty addr means off: nil, nil.
// Its metrics carry the mode (proxy or plugin) as the label mode.
func listenMetrics(addr, mode string) (*metricsEndpoint, error) {
	if addr == "" {
		return nil, nil
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	return &metricsEndpoint{rec: metrics.New(currentBuild().Version, mode), lis: lis}, nil
}

// recorder is server.Options.Metrics: nil when metrics are off.
func (m *metricsEndpoint) recorder() server.Metrics {
	if m == nil {
		return nil
	}
	return m.rec
}

// serve starts serving; srv answers the health check and counts the pins.
// The bound address is logged ("serving metrics", address=host:port), which
// is how a port chosen with :0 is found.
func (m *metricsEndpoint) serve(srv *server.Server, log *logrus.Entry) {
	if m == nil {
		return
	}
	m.rec.WatchPins(srv.PinCounts)
	mux := http.NewServeMux()
	mux.Handle("/metrics", m.rec.Handler())
	mux.Handle("/healthz", metrics.Healthz(srv.CheckBackend))
	m.http = &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	log.WithField("address", m.lis.Addr().String()).Info("serving metrics")
	go func() {
		if err := m.http.Serve(m.lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.WithError(err).Error("metrics endpoint stopped")
		}
	}()
}

// close stops serving, giving scrapes in flight a moment.
func (m *metricsEndpoint) close() {
	switch {
	case m == nil:
	case m.http == nil:
		m.lis.Close()
	default:
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		m.http.Shutdown(ctx)
	}
}
