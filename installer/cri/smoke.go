package cri

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Smoke checks socket's CRI as a kubelet uses it, in two parts that the
// node's kubelet leaves alone. A kubelet kills, within seconds, every pod
// sandbox of a pod it does not know (its housekeeping; seen on the node
// test: the container's start failed on "lstat /proc/PID/ns/ipc"), so:
//   - a pod sandbox of its own (on the node's network: no CNI) is run, then
//     stopped and removed at once;
//   - a container of image, which must be on the node already, running
//     command, is created in the sandbox of the pod whose uid is podUID
//     (the installer's own, which the kubelet knows, and where it leaves a
//     container not in the pod's spec alone), waited for its exit 0, and
//     removed.
//
// Whatever happened, nothing of it is left. ctx bounds it all (Timeout
// does not).
func (c Client) Smoke(ctx context.Context, socket, podUID, image string, command []string) error {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	if err := runSandbox(ctx, rt); err != nil {
		return err
	}
	id, config, err := podSandbox(ctx, rt, podUID)
	if err != nil {
		return err
	}
	return runContainer(ctx, rt, id, config, image, command)
}

// runSandbox runs a pod sandbox of the smoke test's own, and stops and
// removes it.
func runSandbox(ctx context.Context, rt runtimeapi.RuntimeServiceClient) error {
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
	return removeSandbox(ctx, rt, sb.PodSandboxId)
}

// podSandbox is the ready sandbox of the pod whose uid is podUID, and its
// config as the runtime keeps it (containerd's verbose status: "info"'s
// "config"), which a container created in it is given, as the kubelet
// gives it.
func podSandbox(ctx context.Context, rt runtimeapi.RuntimeServiceClient, podUID string) (string, *runtimeapi.PodSandboxConfig, error) {
	if podUID == "" {
		return "", nil, errors.New("no pod to run the smoke test's container in (the installer's own: --pod-uid, $POD_UID)")
	}
	l, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{
		State:         &runtimeapi.PodSandboxStateValue{State: runtimeapi.PodSandboxState_SANDBOX_READY},
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": podUID},
	}})
	if err != nil {
		return "", nil, fmt.Errorf("list the pod sandbox of pod %s: %w", podUID, err)
	}
	if len(l.Items) != 1 {
		return "", nil, fmt.Errorf("pod %s has %d ready sandboxes, want 1", podUID, len(l.Items))
	}
	id := l.Items[0].Id
	st, err := rt.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		return "", nil, fmt.Errorf("the status of pod %s's sandbox: %w", podUID, err)
	}
	var info struct {
		Config *runtimeapi.PodSandboxConfig `json:"config"`
	}
	if err := json.Unmarshal([]byte(st.Info["info"]), &info); err != nil || info.Config == nil {
		return "", nil, fmt.Errorf("the runtime does not say the config of pod %s's sandbox (its verbose status's info.config): %v", podUID, err)
	}
	return id, info.Config, nil
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
	suffix := make([]byte, 4)
	_, _ = rand.Read(suffix)
	cfg := &runtimeapi.ContainerConfig{
		// A name of its own each time: one left by a killed installer does
		// not block the next (the runtime reserves names per sandbox).
		Metadata: &runtimeapi.ContainerMetadata{Name: "cri-nstarget-smoke-" + hex.EncodeToString(suffix)},
		Image:    &runtimeapi.ImageSpec{Image: image},
		Command:  command,
		Labels:   map[string]string{"cri-nstarget.io/smoke": "true"},
		// The pod's namespaces, as the kubelet gives each container of it
		// (containerd refuses a user namespace config unlike the sandbox's).
		Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: sandbox.GetLinux().GetSecurityContext().GetNamespaceOptions(),
		}},
	}
	cr, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sandboxID, Config: cfg, SandboxConfig: sandbox})
	if err != nil {
		return fmt.Errorf("create a container of %s: %w", image, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, err := rt.RemoveContainer(rctx, &runtimeapi.RemoveContainerRequest{ContainerId: cr.ContainerId})
		if err != nil && status.Code(err) != codes.NotFound && retErr == nil { // NotFound: the kubelet's GC took it
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
	// The kubelet may have stopped and removed it already (NotFound).
	if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id}); err != nil && status.Code(err) != codes.NotFound {
		return fmt.Errorf("stop the pod sandbox: %w", err)
	}
	if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id}); err != nil {
		return fmt.Errorf("remove the pod sandbox: %w", err)
	}
	return nil
}
