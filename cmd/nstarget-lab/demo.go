package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// demo shows `kubectl debug --target=app` as kubelet would send it: a pod
// whose app has its own PID namespace, then a debug container with pid
// TARGET, through the shim; and, for contrast, one with pid POD.
func demo(ctx context.Context, binary string) (err error) {
	dir, err := os.MkdirTemp("/tmp", "nsd-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	l, err := startLab(ctx, binary, dir, nil)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, l.close()) }()
	rt := l.shim.Runtime
	conn, err := harness.Dial(l.env.Containerd.Endpoint())
	if err != nil {
		return err
	}
	defer conn.Close()
	direct := runtimeapi.NewRuntimeServiceClient(conn)

	sbCfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "demo", Uid: "demo-uid", Namespace: "default"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER}}},
	}
	sb, err := rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: sbCfg})
	if err != nil {
		return fmt.Errorf("RunPodSandbox: %w", err)
	}
	defer func() {
		c := context.Background()
		rt.StopPodSandbox(c, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.GetPodSandboxId()})
		rt.RemovePodSandbox(c, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.GetPodSandboxId()})
	}()
	start := func(name string, ns *runtimeapi.NamespaceOption, cmd ...string) (string, error) {
		resp, err := rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{
			PodSandboxId: sb.GetPodSandboxId(), SandboxConfig: sbCfg,
			Config: &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: name},
				Image:    &runtimeapi.ImageSpec{Image: l.env.BusyboxImage},
				Command:  cmd,
				Linux:    &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}},
			},
		})
		if err != nil {
			return "", fmt.Errorf("CreateContainer %s: %w", name, err)
		}
		if _, err := rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: resp.GetContainerId()}); err != nil {
			return "", fmt.Errorf("StartContainer %s: %w", name, err)
		}
		return resp.GetContainerId(), nil
	}
	exec := func(id string, cmd ...string) string {
		r, err := rt.ExecSync(ctx, &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 10})
		if err != nil {
			return "error: " + err.Error()
		}
		return strings.TrimRight(string(r.GetStdout())+string(r.GetStderr()), "\n")
	}
	indent := func(s string) string { return "    " + strings.ReplaceAll(s, "\n", "\n    ") }

	app, err := start("app", &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}, "sleep", "3600")
	if err != nil {
		return err
	}
	fmt.Printf("\n1. Pod %.12s runs container \"app\" (%.12s) in its own PID namespace (Kubernetes' default).\n", sb.GetPodSandboxId(), app)
	fmt.Printf("   Inside app, `ps`:\n%s\n", indent(exec(app, "ps", "-o", "pid,args")))

	dbg, err := start("debugger", &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: app}, "sleep", "3600")
	if err != nil {
		return err
	}
	fmt.Printf("\n2. kubectl debug --target=app: CreateContainer \"debugger\" with pid TARGET=%.12s, through cri-nstarget.\n", app)
	fmt.Printf("   Inside debugger, `ps` shows app's processes:\n%s\n", indent(exec(dbg, "ps", "-o", "pid,args")))

	plain, err := start("no-target", &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_POD}, "sleep", "3600")
	if err != nil {
		return err
	}
	fmt.Printf("\n3. For contrast, a container with pid POD sees the pod sandbox's process and itself, not the app:\n%s\n", indent(exec(plain, "ps", "-o", "pid,args")))

	fmt.Println("\n4. PID namespaces, read from inside each container (readlink /proc/self/ns/pid):")
	for _, c := range []struct{ name, id string }{{"app", app}, {"debugger", dbg}, {"no-target", plain}} {
		fmt.Printf("    %-10s %s\n", c.name, exec(c.id, "readlink", "/proc/self/ns/pid"))
	}

	st, err := direct.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: dbg, Verbose: true})
	if err != nil {
		return err
	}
	var info struct {
		Config      *runtimeapi.ContainerConfig `json:"config"`
		RuntimeSpec *specs.Spec                 `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &info); err != nil {
		return fmt.Errorf("verbose status: %w", err)
	}
	path, _ := oci.NamespacePath(info.RuntimeSpec, specs.PIDNamespace)
	fmt.Printf("\n5. What containerd holds for debugger (crictl inspect):\n")
	fmt.Printf("    CRI config pid mode:     %v   (the shim forwarded POD: any backend accepts it)\n", info.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid())
	fmt.Printf("    OCI spec pid namespace:  %s   (the shim's pin of app's namespace)\n", path)
	fmt.Printf("    annotation %s:\n    %s\n", oci.AnnotationTargeting, info.RuntimeSpec.Annotations[oci.AnnotationTargeting])
	fmt.Println()
	return nil
}
