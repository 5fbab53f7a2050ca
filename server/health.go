package server

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The CRI socket also serves grpc.health.v1.Health, for probes such as
// grpc-health-probe. It is registered on the proxy's own grpc.Server: calls to
// it do not reach the UnknownServiceHandler, and rawCodec encodes its messages
// as protobuf. It answers for the shim (SERVING while the backend answers the
// shim), not for the backend's own health service, which it shadows.

// HealthTimeout bounds one health probe of the backend.
const HealthTimeout = 2 * time.Second

// healthServices are the names the health service answers for: the server
// as a whole ("") and the two CRI services.
var healthServices = []string{"", "runtime.v1.RuntimeService", "runtime.v1.ImageService"}

func registerHealth(g *grpc.Server, hs *health.Server) {
	setHealth(hs, healthpb.HealthCheckResponse_NOT_SERVING) // until the first probe
	healthpb.RegisterHealthServer(g, hs)
}

func (s *Server) setHealth(st healthpb.HealthCheckResponse_ServingStatus) { setHealth(s.health, st) }

// setHealth sets every one of healthServices to st on hs.
func setHealth(hs *health.Server, st healthpb.HealthCheckResponse_ServingStatus) {
	for _, name := range healthServices {
		hs.SetServingStatus(name, st)
	}
}

// CheckBackend calls the backend's CRI Version through the proxy's own
// connection, within HealthTimeout: the shim is healthy when that answers
// (and, in the plugin mode, while it is connected to a usable NRI).
func (s *Server) CheckBackend(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, HealthTimeout)
	defer cancel()
	if _, err := s.version.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		return fmt.Errorf("backend CRI Version: %w", err)
	}
	if s.plugin != nil {
		// the plugin mode does nothing but through containerd's NRI
		if usable, why := s.nri.Usable(); !usable {
			return fmt.Errorf("not connected to containerd's NRI: %s", why)
		}
	}
	return nil
}

// WatchBackend keeps the health service in step with the backend until ctx
// is done: SERVING while CheckBackend succeeds, NOT_SERVING otherwise, probed
// every interval. When ctx is done, the shim is stopping: NOT_SERVING for
// good.
func (s *Server) WatchBackend(ctx context.Context, every time.Duration) {
	defer s.health.Shutdown()
	serving := false
	for first := true; ; first = false {
		err := s.CheckBackend(ctx)
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil && (first || !serving):
			s.setHealth(healthpb.HealthCheckResponse_SERVING)
			s.log.Info("backend answers: health SERVING")
		case err != nil && (first || serving):
			s.setHealth(healthpb.HealthCheckResponse_NOT_SERVING)
			s.log.WithError(err).Warn("backend does not answer: health NOT_SERVING")
		}
		serving = err == nil
		select {
		case <-ctx.Done():
			return
		case <-time.After(every):
		}
	}
}
