package cri

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Smoke creates a pod sandbox (on the node's network: no CNI involved) and
// in it a container of image, which must be on the node already, running
// command; it waits for the container to exit 0, then removes the container
// and the sandbox, whatever happened. ctx bounds it all (Timeout does not).
func (c Client) Smoke(ctx context.Context, socket, image string, command []string) (retErr error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	uid := make([]byte, 8)
	_, _ = rand.Read(uid)
	sandbox := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "cri-nstarget-smoke", Namespace: "cri-nstarget", Uid: hex.EncodeToString(uid)},
		Labels:   map[string]string{"cri-nstarget.io/smoke": "true"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE},
		}},
	}
	parent, err := cgroupParent(ctx, rt)
	if err != nil {
		return err
	}
	sandbox.Linux.CgroupParent = parent
	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sandbox})
	if err != nil {
		return fmt.Errorf("run a pod sandbox: %w", err)
	}
	defer func() {
		if err := removeSandbox(ctx, rt, sb.PodSandboxId); err != nil && retErr == nil {
			retErr = err
		}
	}()
	return runContainer(ctx, rt, sb.PodSandboxId, sandbox, image, command)
}

// SmokeSlice is the smoke test's cgroup parent under the systemd cgroup
// driver, beside the kubelet's BestEffort pods (runc refuses a cgroupfs path
// there: "expected cgroupsPath to be of format slice:prefix:name").
const SmokeSlice = "kubepods-besteffort.slice"

// cgroupParent is the sandbox's cgroup parent for the runtime's cgroup
// driver, as the runtime says it (CRI RuntimeConfig, as the kubelet asks
// it): SmokeSlice under systemd; the runtime's default under cgroupfs, or
// when the runtime does not say (Unimplemented: containerd 1.7).
func cgroupParent(ctx context.Context, rt runtimeapi.RuntimeServiceClient) (string, error) {
	r, err := rt.RuntimeConfig(ctx, &runtimeapi.RuntimeConfigRequest{})
	switch {
	case status.Code(err) == codes.Unimplemented:
		return "", nil
	case err != nil:
		return "", fmt.Errorf("the runtime's cgroup driver (RuntimeConfig): %w", err)
	case r.GetLinux().GetCgroupDriver() == runtimeapi.CgroupDriver_SYSTEMD:
		return SmokeSlice, nil
	}
	return "", nil
}

// runContainer creates and starts the container, waits for its exit 0, and
// removes it.
func runContainer(ctx context.Context, rt runtimeapi.RuntimeServiceClient, sandboxID string, sandbox *runtimeapi.PodSandboxConfig, image string, command []string) (retErr error) {
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "smoke"},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Command:  command,
		Labels:   map[string]string{"cri-nstarget.io/smoke": "true"},
	}
	cr, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: cfg, SandboxConfig: sandbox})
	if err != nil {
		return fmt.Errorf("create a container of %s: %w", image, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, err := rt.RemoveContainer(rctx, &runtimeapi.RemoveContainerRequest{ContainerId: cr.ContainerId})
		if err != nil && retErr == nil {
			retErr = fmt.Errorf("remove the container: %w", err)
		}
	}()
	if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: cr.ContainerId}); err != nil {
		return fmt.Errorf("start the container %q: %w", command, err)
	}
	for {
		st, err := rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: cr.ContainerId})
		if err != nil {
			return fmt.Errorf("the container's status: %w", err)
		}
		if s := st.Status; s.State == runtimeapi.ContainerState_CONTAINER_EXITED {
			if s.ExitCode != 0 {
				return fmt.Errorf("the container %q exited %d (%s: %s)", command, s.ExitCode, s.Reason, s.Message)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the container %q did not exit: %w", command, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// removeSandbox stops and removes the sandbox, with a bound of its own
// (ctx may have ended).
func removeSandbox(ctx context.Context, rt runtimeapi.RuntimeServiceClient, id string) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("stop the pod sandbox: %w", err)
	}
	if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("remove the pod sandbox: %w", err)
	}
	return nil
}
