package server

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The health service lives on the proxy's grpc.Server, beside the
// UnknownServiceHandler and its raw codec: both work, and health follows the
// backend.
func TestHealthService(t *testing.T) {
	var cri *flakyCRI
	r := buildRigEdit(t, false, nil, false, func(d *deps) {
		cri = &flakyCRI{backendCRI: d.cri}
		d.cri = cri
	})
	hc := healthpb.NewHealthClient(r.shim)
	statusOf := func(service string) healthpb.HealthCheckResponse_ServingStatus {
		t.Helper()
		resp, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service})
		if err != nil {
			t.Fatalf("Check(%q): %v", service, err)
		}
		return resp.GetStatus()
	}
	becomes := func(want healthpb.HealthCheckResponse_ServingStatus) {
		t.Helper()
		waitFor(t, "health to become "+want.String(), func() bool { return statusOf("") == want })
		for _, svc := range healthServices {
			if got := statusOf(svc); got != want {
				t.Errorf("Check(%q) = %v, want %v", svc, got, want)
			}
		}
	}

	if got := statusOf(""); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("before the first probe: %v, want NOT_SERVING", got)
	}
	if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: "no.such.Service"}); status.Code(err) != codes.NotFound {
		t.Errorf("Check(unknown service) = %v, want NotFound", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { r.server.WatchBackend(ctx, 10*time.Millisecond); close(done) }()
	becomes(healthpb.HealthCheckResponse_SERVING)

	// CRI calls still pass through, raw, on the same server.
	v, err := runtimeapi.NewRuntimeServiceClient(r.shim).Version(context.Background(), &runtimeapi.VersionRequest{})
	if err != nil || v.GetRuntimeName() != "fake" {
		t.Errorf("Version through the shim = %v, %v", v, err)
	}

	cri.down.Store(true)
	becomes(healthpb.HealthCheckResponse_NOT_SERVING)
	if err := r.server.CheckBackend(context.Background()); status.Code(err) != codes.Unavailable {
		t.Errorf("CheckBackend with the backend down = %v, want its Unavailable wrapped", err)
	}
	cri.down.Store(false)
	becomes(healthpb.HealthCheckResponse_SERVING)

	cancel() // the shim stops: NOT_SERVING for good
	<-done
	if got := statusOf(""); got != healthpb.HealthCheckResponse_NOT_SERVING {
		t.Errorf("after the watch ended: %v, want NOT_SERVING", got)
	}
}
