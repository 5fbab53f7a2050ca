package cri

import (
	"context"
	"encoding/json"
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
	"google.golang.org/protobuf/proto"
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
	// the installer's pod's sandbox ("pod", uid ownPod, its config as
	// containerd's verbose status says it, noInfo: not said), and what a
	// container was created in; gone: the smoke test's own sandbox was
	// stopped and removed by someone else (the kubelet) already.
	noInfo     bool
	gone       bool
	createdIn  string
	createdCfg *runtimeapi.PodSandboxConfig
}

const ownPod = "0b4c5e7e-1111-4a2b-9c3d-5e6f7a8b9c0d"

// podConfig is the installer's pod's sandbox config as the kubelet gave it.
var podConfig = &runtimeapi.PodSandboxConfig{
	Metadata: &runtimeapi.PodSandboxMetadata{Name: "cri-nstarget-install-x", Namespace: "cri-nstarget", Uid: ownPod},
	Linux: &runtimeapi.LinuxPodSandboxConfig{CgroupParent: "kubepods-besteffort-pod0b4c5e7e_1111.slice",
		SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: &runtimeapi.NamespaceOption{
			Network: runtimeapi.NamespaceMode_NODE, UsernsOptions: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_NODE},
		}},
	},
}

func (r *runtime) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	f := req.GetFilter()
	if f.GetState().GetState() != runtimeapi.PodSandboxState_SANDBOX_READY || f.GetLabelSelector()["io.kubernetes.pod.uid"] != ownPod {
		return &runtimeapi.ListPodSandboxResponse{}, nil
	}
	return &runtimeapi.ListPodSandboxResponse{Items: []*runtimeapi.PodSandbox{{Id: "pod", Metadata: podConfig.Metadata}}}, nil
}

func (r *runtime) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	if req.PodSandboxId != "pod" {
		return nil, status.Error(codes.NotFound, "no such sandbox")
	}
	resp := &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{Id: "pod", State: runtimeapi.PodSandboxState_SANDBOX_READY}}
	if req.Verbose && !r.noInfo {
		b, _ := json.Marshal(map[string]any{"pid": 42, "config": podConfig})
		resp.Info = map[string]string{"info": string(b)}
	}
	return resp, nil
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
	// containerd's own check (its generated spec's): a container's user
	// namespace config is its sandbox's.
	if sb, ct := req.SandboxConfig.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions(),
		req.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetUsernsOptions(); !proto.Equal(sb, ct) {
		return nil, status.Errorf(codes.Unknown, "failed to generate spec opts: user namespace config for sandbox is different from container. Sandbox userns config: %v - Container userns config: %v", sb, ct)
	}
	r.live["container"], r.command = true, req.Config.Command
	r.createdIn, r.createdCfg = req.PodSandboxId, req.SandboxConfig
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

func (r *runtime) StopPodSandbox(_ context.Context, req *runtimeapi.StopPodSandboxRequest) (*runtimeapi.StopPodSandboxResponse, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if req.PodSandboxId != "sandbox" {
		return nil, status.Errorf(codes.FailedPrecondition, "the smoke test stops %s", req.PodSandboxId)
	}
	if r.gone {
		delete(r.live, "sandbox")
		return nil, status.Error(codes.NotFound, "an error occurred when try to find sandbox: not found")
	}
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
			err := Client{}.Smoke(ctx, serve(t, r), ownPod, "img", []string{"/bin/true"})
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
			if len(r.live) != 0 {
				t.Errorf("left: %v", r.live)
			}
			if r.network != runtimeapi.NamespaceMode_NODE || !tc.failCreate && (len(r.command) != 1 || r.command[0] != "/bin/true") {
				t.Errorf("network %v, command %q", r.network, r.command)
			}
			// The container in the installer's pod, given its sandbox's
			// config (its cgroup parent, as the kubelet gives it).
			if !tc.failCreate && (r.createdIn != "pod" || r.createdCfg.GetLinux().GetCgroupParent() != podConfig.Linux.CgroupParent) {
				t.Errorf("container created in sandbox %q with config %v", r.createdIn, r.createdCfg)
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
			if err := (Client{}).Smoke(ctx, serve(t, r), ownPod, "img", []string{"/bin/true"}); err != nil || r.parent != tc.want {
				t.Errorf("got %v with parent %q, want parent %q", err, r.parent, tc.want)
			}
		})
	}
}

// TestSmokePod: the smoke test's own sandbox stopped and removed by the
// kubelet first (NotFound) is no failure; without the installer's pod, or
// a runtime that does not say its sandbox's config, it fails, saying why,
// and leaves nothing.
func TestSmokePod(t *testing.T) {
	for _, tc := range []struct {
		desc         string
		pod          string
		gone, noInfo bool
		want         string
	}{
		{"the sandbox gone already", ownPod, true, false, ""},
		{"no pod", "", false, false, "no pod to run the smoke test's container in"},
		{"another pod", "not-this-pod", false, false, "pod not-this-pod has 0 ready sandboxes"},
		{"no config said", ownPod, false, true, "does not say the config of pod " + ownPod},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r := &runtime{live: map[string]bool{}, gone: tc.gone, noInfo: tc.noInfo}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			err := Client{}.Smoke(ctx, serve(t, r), tc.pod, "img", []string{"/bin/true"})
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
			if len(r.live) != 0 {
				t.Errorf("left: %v", r.live)
			}
		})
	}
}
