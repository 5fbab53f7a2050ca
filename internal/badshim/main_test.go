package main

import (
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeBackend answers the few calls the test makes, as containerd would.
type fakeBackend struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (fakeBackend) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "fake", RuntimeApiVersion: "v1"}, nil
}

func (fakeBackend) Status(context.Context, *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	return &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}}, nil
}

func (fakeBackend) RunPodSandbox(context.Context, *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: "s1"}, nil
}

func (fakeBackend) CreateContainer(context.Context, *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	return &runtimeapi.CreateContainerResponse{ContainerId: "c1"}, nil
}

func (fakeBackend) StopContainer(context.Context, *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	return nil, status.Error(codes.NotFound, "no such container")
}

func (fakeBackend) StreamContainers(_ *runtimeapi.StreamContainersRequest, s grpc.ServerStreamingServer[runtimeapi.StreamContainersResponse]) error {
	for _, id := range []string{"a", "b"} {
		if err := s.Send(&runtimeapi.StreamContainersResponse{Containers: []*runtimeapi.Container{{Id: id}}}); err != nil {
			return err
		}
	}
	return nil
}

// serve starts the fake backend and the badshim in m before it, and
// returns a connection to the badshim.
func serve(t *testing.T, m string) *grpc.ClientConn {
	t.Helper()
	dir := t.TempDir()
	lis, err := net.Listen("unix", filepath.Join(dir, "backend.sock"))
	if err != nil {
		t.Fatal(err)
	}
	backend := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(backend, fakeBackend{})
	go func() { _ = backend.Serve(lis) }()
	t.Cleanup(backend.Stop)

	srv, closeBackend, err := newServer(m, filepath.Join(dir, "backend.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(closeBackend)
	shim, err := net.Listen("unix", filepath.Join(dir, "shim.sock"))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(shim) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("unix://"+filepath.Join(dir, "shim.sock"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func TestModes(t *testing.T) {
	calls := map[string]func(context.Context, runtimeapi.RuntimeServiceClient) error{
		"Version": func(ctx context.Context, c runtimeapi.RuntimeServiceClient) error {
			r, err := c.Version(ctx, &runtimeapi.VersionRequest{})
			if err == nil && r.RuntimeName != "fake" {
				t.Errorf("Version answered %v, not the backend's", r)
			}
			return err
		},
		"Status": func(ctx context.Context, c runtimeapi.RuntimeServiceClient) error {
			_, err := c.Status(ctx, &runtimeapi.StatusRequest{})
			return err
		},
		"RunPodSandbox": func(ctx context.Context, c runtimeapi.RuntimeServiceClient) error {
			_, err := c.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{})
			return err
		},
		"CreateContainer": func(ctx context.Context, c runtimeapi.RuntimeServiceClient) error {
			r, err := c.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{})
			if err == nil && r.ContainerId != "c1" {
				t.Errorf("CreateContainer answered %v, not the backend's", r)
			}
			return err
		},
		"StopContainer": func(ctx context.Context, c runtimeapi.RuntimeServiceClient) error {
			_, err := c.StopContainer(ctx, &runtimeapi.StopContainerRequest{})
			return err
		},
		"StreamContainers": func(ctx context.Context, c runtimeapi.RuntimeServiceClient) error {
			s, err := c.StreamContainers(ctx, &runtimeapi.StreamContainersRequest{})
			if err != nil {
				return err
			}
			var ids []string
			for {
				r, err := s.Recv()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					return err
				}
				ids = append(ids, r.Containers[0].Id)
			}
			if len(ids) != 2 {
				t.Errorf("StreamContainers gave %v, want a and b", ids)
			}
			return nil
		},
	}
	for _, tc := range []struct {
		mode string
		want map[string]codes.Code // the calls' codes; those not named: OK
	}{
		{"notready", map[string]codes.Code{"Status": codes.Unavailable, "RunPodSandbox": codes.Unavailable, "StopContainer": codes.NotFound}},
		{"nocreate", map[string]codes.Code{"CreateContainer": codes.Unavailable, "StopContainer": codes.NotFound}},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			conn := serve(t, tc.mode)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			h, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{})
			if err != nil || h.Status != healthpb.HealthCheckResponse_SERVING {
				t.Errorf("health: %v, %v; want SERVING", h, err)
			}
			c := runtimeapi.NewRuntimeServiceClient(conn)
			for name, call := range calls {
				if got := status.Code(call(ctx, c)); got != tc.want[name] {
					t.Errorf("%s: %s, want %s", name, got, tc.want[name])
				}
			}
		})
	}
}

func TestUnknownMode(t *testing.T) {
	if _, _, err := newServer("slow", "/nonexistent"); err == nil {
		t.Error("mode slow: no error")
	}
}
