//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/critesting"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

var shimCount atomic.Int32

// startShim starts a cri-nstarget in front of the test containerd, stopped
// (by pid) when t ends; its pins must all be released by then.
func startShim(t *testing.T, flags ...string) *harness.Shim {
	t.Helper()
	return startShimBinary(t, shimBin, flags...)
}

// startShimStrict is startShim, in strict mode (--strict-targeting after
// the flags given) when strict.
func startShimStrict(t *testing.T, strict bool, flags ...string) *harness.Shim {
	t.Helper()
	if strict {
		flags = append(flags[:len(flags):len(flags)], "--strict-targeting")
	}
	return startShim(t, flags...)
}

// startShimBinary is startShim for another binary (e.g. a wrapper).
func startShimBinary(t *testing.T, binary string, flags ...string) *harness.Shim {
	t.Helper()
	dir := filepath.Join(tmp, fmt.Sprintf("s%d", shimCount.Add(1)))
	// NSTARGET_SHIM_FLAGS go to every shim, before the test's own flags
	// (e.g. "--targeting-via update" to run the tests on the Update path)
	flags = append(strings.Fields(os.Getenv("NSTARGET_SHIM_FLAGS")), flags...)
	s, err := harness.StartShim(context.Background(), binary, dir, env.Containerd, flags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// runs after the cleanups of the pods made through this shim
		if m := mountsUnder(t, s.StateDir()); len(m) > 0 {
			t.Errorf("pins left after the test's pods were removed: %v", m)
		}
		if err := s.Close(); err != nil {
			t.Errorf("stop shim: %v", err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(s.LogPath())
			t.Logf("shim log:\n%s", b)
		}
	})
	return s
}

func shimCRI(s *harness.Shim) critesting.CRI {
	return critesting.CRI{Runtime: s.Runtime, Images: s.Images}
}

// ctx is a call's context: a minute, as critesting's own calls have.
func ctx(t *testing.T) context.Context {
	t.Helper()
	return critesting.Context(t, critesting.CallTimeout)
}

type pod struct {
	id  string
	cfg *runtimeapi.PodSandboxConfig
}

var podCount atomic.Int32

// runPod starts a host-network pod whose containers get pid namespaces per
// pidMode (CONTAINER: each its own, like Kubernetes' default; POD: shared).
// It is stopped and removed through the same endpoint when t ends (so a
// shim sees the removal and releases its pins), or through containerd
// directly if that endpoint is gone.
func runPod(t *testing.T, c critesting.CRI, pidMode runtimeapi.NamespaceMode) pod {
	t.Helper()
	return runPodWith(t, c, &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: pidMode})
}

// stopPod stops pod sandbox id through c as the kubelet does: a failed
// StopPodSandbox is tried again, up to three times a second apart, each
// retried error logged. containerd 2.0 (and 2.1) sometimes answers "failed
// to kill container ...: ttrpc: closed" when a container died with the PID
// namespace it shared (a debug container with its target, here); the same
// call again stops the pod.
func stopPod(t *testing.T, c critesting.CRI, id string) {
	t.Helper()
	for attempt := 1; ; attempt++ {
		_, err := c.Runtime.StopPodSandbox(ctx(t), &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
		if err == nil {
			return
		}
		if attempt == 3 {
			t.Fatalf("StopPodSandbox %s (%d attempts): %v", id, attempt, err)
		}
		t.Logf("StopPodSandbox %s (attempt %d, retried as the kubelet does): %v", id, attempt, err)
		time.Sleep(time.Second)
	}
}

// runPodWith is runPod with the pod's namespace options.
func runPodWith(t *testing.T, c critesting.CRI, ns *runtimeapi.NamespaceOption) pod {
	t.Helper()
	return runPodOn(t, c, "", ns)
}

// runPodOn is runPodWith on containerd's runtime handler ("": runc).
func runPodOn(t *testing.T, c critesting.CRI, handler string, ns *runtimeapi.NamespaceOption) pod {
	t.Helper()
	n := podCount.Add(1)
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: fmt.Sprintf("p%d", n), Uid: fmt.Sprintf("uid-%d-%d", os.Getpid(), n), Namespace: "nst"},
		Linux:    &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{NamespaceOptions: ns}},
	}
	resp, err := c.Runtime.RunPodSandbox(ctx(t), &runtimeapi.RunPodSandboxRequest{Config: cfg, RuntimeHandler: handler})
	if err != nil {
		t.Fatalf("RunPodSandbox: %v", err)
	}
	id := resp.GetPodSandboxId()
	t.Cleanup(func() {
		for _, via := range []critesting.CRI{c, direct} {
			cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			via.Runtime.StopPodSandbox(cctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
			_, err := via.Runtime.RemovePodSandbox(cctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
			cancel()
			if err == nil {
				return
			}
		}
	})
	return pod{id: id, cfg: cfg}
}

// createIn creates a busybox container running `sleep 3600` (or cmd).
func createIn(t *testing.T, c critesting.CRI, p pod, name string, ns *runtimeapi.NamespaceOption, cmd ...string) (string, error) {
	t.Helper()
	if len(cmd) == 0 {
		cmd = []string{"sleep", "3600"}
	}
	return createCfg(t, c, p, &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Command:  cmd,
		Linux:    &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}},
	})
}

// createCfg creates a container from cfg, with the busybox image.
func createCfg(t *testing.T, c critesting.CRI, p pod, cfg *runtimeapi.ContainerConfig) (string, error) {
	t.Helper()
	cfg.Image = &runtimeapi.ImageSpec{Image: env.BusyboxImage}
	resp, err := c.Runtime.CreateContainer(ctx(t), &runtimeapi.CreateContainerRequest{PodSandboxId: p.id, SandboxConfig: p.cfg, Config: cfg})
	return resp.GetContainerId(), err
}

func mustCreate(t *testing.T, c critesting.CRI, p pod, name string, ns *runtimeapi.NamespaceOption, cmd ...string) string {
	t.Helper()
	id, err := createIn(t, c, p, name, ns, cmd...)
	if err != nil {
		t.Fatalf("CreateContainer %s: %v", name, err)
	}
	return id
}

func mustStart(t *testing.T, c critesting.CRI, id string) {
	t.Helper()
	if _, err := c.Runtime.StartContainer(ctx(t), &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
		t.Fatalf("StartContainer %s: %v", id, err)
	}
}

// run creates and starts a container.
func run(t *testing.T, c critesting.CRI, p pod, name string, ns *runtimeapi.NamespaceOption, cmd ...string) string {
	t.Helper()
	id := mustCreate(t, c, p, name, ns, cmd...)
	mustStart(t, c, id)
	return id
}

func execIn(t *testing.T, c critesting.CRI, id string, cmd ...string) string {
	t.Helper()
	resp, err := c.Runtime.ExecSync(ctx(t), &runtimeapi.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 20})
	if err != nil {
		t.Fatalf("exec %v in %s: %v", cmd, id, err)
	}
	if resp.GetExitCode() != 0 {
		t.Fatalf("exec %v in %s: exit %d: %s", cmd, id, resp.GetExitCode(), resp.GetStderr())
	}
	return strings.TrimSpace(string(resp.GetStdout()))
}

// nsInside is the namespace link (e.g. "pid:[4026532]") seen from inside.
func nsInside(t *testing.T, c critesting.CRI, id, kind string) string {
	t.Helper()
	return execIn(t, c, id, "readlink", "/proc/self/ns/"+kind)
}

// nsOfPid is the namespace link of a host process.
func nsOfPid(t *testing.T, pid int, kind string) string {
	t.Helper()
	l, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/ns/" + kind)
	if err != nil {
		t.Fatalf("namespace of pid %d: %v", pid, err)
	}
	return l
}

func sandboxPid(t *testing.T, id string) int {
	t.Helper()
	resp, err := direct.Runtime.PodSandboxStatus(ctx(t), &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
	if err != nil {
		t.Fatalf("PodSandboxStatus %s: %v", id, err)
	}
	var si struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &si); err != nil || si.Pid == 0 {
		t.Fatalf("verbose info of sandbox %s: %v (%q)", id, err, resp.GetInfo()["info"])
	}
	return si.Pid
}

func containerIDs(t *testing.T) map[string]bool {
	t.Helper()
	resp, err := direct.Runtime.ListContainers(ctx(t), &runtimeapi.ListContainersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, c := range resp.GetContainers() {
		ids[c.GetId()] = true
	}
	return ids
}

// mountsUnder lists the mount points at or below dir.
func mountsUnder(t *testing.T, dir string) []string {
	t.Helper()
	m, err := harness.MountsUnder(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func pidOf(t *testing.T, id string) int {
	t.Helper()
	pid := direct.Info(t, id).Pid
	if pid == 0 {
		t.Fatalf("container %s has no pid", id)
	}
	return pid
}

// eventually polls cond for up to 10 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting for %s", what)
}

var (
	podMode  = runtimeapi.NamespaceMode_POD
	ownMode  = runtimeapi.NamespaceMode_CONTAINER
	pidOwn   = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}
	targetOf = func(id string) *runtimeapi.NamespaceOption {
		return &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: id}
	}
)

// nsPath is the spec's namespace path of kind ("pid", "ipc").
func nsPath(ci critesting.ContainerInfo, kind string) string {
	p, _ := oci.NamespacePath(ci.RuntimeSpec, specs.LinuxNamespaceType(kind))
	return p
}

func writeFile(path, s string) error { return os.WriteFile(path, []byte(s), 0o644) }
