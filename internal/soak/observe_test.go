package soak

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func TestFirstLine(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ desc, log, want string }{
		{"stdout first", "2026-11-27T09:00:00.1Z stdout F pid:[4026532]\n2026-11-27T09:00:00.2Z stdout F PID ARGS\n", "pid:[4026532]"},
		{"stderr skipped", "2026-11-27T09:00:00.1Z stderr F oops\n2026-11-27T09:00:00.2Z stdout F pid:[7]\n", "pid:[7]"},
		{"empty", "", ""},
		{"not a CRI log line", "pid:[7]\n", ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := filepath.Join(dir, "0.log")
			if err := os.WriteFile(p, []byte(tc.log), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := firstLine(p); got != tc.want {
				t.Errorf("firstLine = %q, want %q", got, tc.want)
			}
		})
	}
	if got := firstLine(filepath.Join(dir, "missing.log")); got != "" {
		t.Errorf("firstLine of a missing file = %q", got)
	}
}

// statuses answers ContainerStatus from a table; every other method of the
// interface is left unimplemented (nil).
type statuses struct {
	runtimeapi.RuntimeServiceClient
	of map[string]*runtimeapi.ContainerStatus
}

func (s statuses) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	st, ok := s.of[req.ContainerId]
	if !ok {
		return nil, status.Error(codes.NotFound, "no such container")
	}
	return &runtimeapi.ContainerStatusResponse{Status: st}, nil
}

func TestEndedFirst(t *testing.T) {
	exited := func(at time.Duration) *runtimeapi.ContainerStatus {
		return &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED, FinishedAt: int64(time.Hour + at)}
	}
	for _, tc := range []struct {
		desc          string
		target, debug *runtimeapi.ContainerStatus
		want          bool
	}{
		{"target exited 7 ms before", exited(0), exited(7 * time.Millisecond), true},
		{"target's exit timed a little after (within the slack)", exited(500 * time.Millisecond), exited(0), true},
		{"target exited long after", exited(5 * time.Second), exited(0), false},
		{"target still running", &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_RUNNING}, exited(0), false},
		{"target gone", nil, exited(0), false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			of := map[string]*runtimeapi.ContainerStatus{"debug": tc.debug}
			if tc.target != nil {
				of["target"] = tc.target
			}
			o := &observer{direct: statuses{of: of}, watch: &watchdog{}}
			if got := o.endedFirst(context.Background(), "target", "debug"); got != tc.want {
				t.Errorf("endedFirst = %v, want %v", got, tc.want)
			}
		})
	}
}
