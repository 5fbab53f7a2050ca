package cri

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// runtime is a CRI runtime in memory: what was created and not removed,
// and how the container exits (exit), or that creating it fails.
type runtime struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	mu         sync.Mutex
	live       map[string]bool
	exit       int32
	failCreate bool
	command    []string
	network    runtimeapi.NamespaceMode
	// driver is the cgroup driver RuntimeConfig says (unset: Unimplemented,
	// as containerd 1.7); under systemd a sandbox's parent must be a slice,
	// as runc requires; parent is the one asked.
	driver *runtimeapi.CgroupDriver
	parent string
}

func (r *runtime) RuntimeConfig(context.Context, *runtimeapi.RuntimeConfigRequest) (*runtimeapi.RuntimeConfigResponse, error) {
	if r.driver == nil {
		return nil, status.Error(codes.Unimplemented, "unknown method RuntimeConfig")
	}
	return &runtimeapi.RuntimeConfigResponse{Linux: &runtimeapi.LinuxRuntimeConfiguration{CgroupDriver: *r.driver}}, nil
}

func (r *runtime) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.parent = req.Config.GetLinux().GetCgroupParent()
	if r.driver != nil && *r.driver == runtimeapi.CgroupDriver_SYSTEMD && !strings.HasSuffix(r.parent, ".slice") {
		return nil, status.Errorf(codes.Unknown, "OCI runtime create failed: expected cgroupsPath to be of format \"slice:prefix:name\" for systemd cgroups, got %q", r.parent)
	}
	r.live["sandbox"] = true
	r.network = req.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetNetwork()
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: "sandbox"}, nil
}

func (r *runtime) CreateContainer(_ context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.failCreate {
		return nil, status.Error(codes.Unknown, "failed to create containerd task")
	}
	r.live["container"], r.command = true, req.Config.Command
	return &runtimeapi.CreateContainerResponse{ContainerId: "container"}, nil
}

func (r *runtime) StartContainer(context.Context, *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	return &runtimeapi.StartContainerResponse{}, nil
}

func (r *runtime) ContainerStatus(context.Context, *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	return &runtimeapi.ContainerStatusResponse{Status: &runtimeapi.ContainerStatus{State: runtimeapi.ContainerState_CONTAINER_EXITED, ExitCode: r.exit}}, nil
}

func (r *runtime) RemoveContainer(context.Context, *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, "container")
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (r *runtime) StopPodSandbox(context.Context, *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	return &runtimeapi.StopPodSandboxResponse{}, nil
}

func (r *runtime) RemovePodSandbox(context.Context, *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.live, "sandbox")
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

// serve serves r on a unix socket in a short temporary directory.
func serve(t *testing.T, r *runtime) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "smoke")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "cri.sock")
	ln, err := net.Listen("unix", socket)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(s, r)
	go s.Serve(ln)
	t.Cleanup(s.Stop)
	return socket
}

// TestSmoke: a container that exits 0 passes, one that exits otherwise or
// cannot be created fails; whatever happened, nothing is left.
func TestSmoke(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		exit       int32
		failCreate bool
		want       string
	}{
		{"exits 0", 0, false, ""},
		{"exits 1", 1, false, "exited 1"},
		{"not created", 0, true, "create a container of img: rpc error: code = Unknown"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := &runtime{live: map[string]bool{}, exit: tc.exit, failCreate: tc.failCreate}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := Client{}.Smoke(ctx, serve(t, r), "img", []string{"/bin/true"})
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
			if len(r.live) != 0 {
				t.Errorf("left: %v", r.live)
			}
			if r.network != runtimeapi.NamespaceMode_NODE || !tc.failCreate && (len(r.command) != 1 || r.command[0] != "/bin/true") {
				t.Errorf("network %v, command %q", r.network, r.command)
			}
		})
	}
}

// TestSmokeCgroupParent: under the systemd cgroup driver (as the runtime
// says it) the sandbox's parent is a slice, which runc requires; under
// cgroupfs, or a runtime that does not say, the runtime's default.
func TestSmokeCgroupParent(t *testing.T) {
	systemd, cgroupfs := runtimeapi.CgroupDriver_SYSTEMD, runtimeapi.CgroupDriver_CGROUPFS
	for _, tc := range []struct {
		desc   string
		driver *runtimeapi.CgroupDriver
		want   string
	}{
		{"systemd", &systemd, SmokeSlice},
		{"cgroupfs", &cgroupfs, ""},
		{"not said", nil, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := &runtime{live: map[string]bool{}, driver: tc.driver}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := (Client{}).Smoke(ctx, serve(t, r), "img", []string{"/bin/true"}); err != nil || r.parent != tc.want {
				t.Errorf("got %v with parent %q, want parent %q", err, r.parent, tc.want)
			}
		})
	}
}
