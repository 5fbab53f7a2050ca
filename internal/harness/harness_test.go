//go:build integration

package harness

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestEnv runs a pod and a container with its own PID namespace on the
// harness's containerd, then checks that Close leaves nothing behind.
func TestEnv(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: running containerd and runc needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	start := time.Now()
	env, err := Start(ctx, "")
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	t.Logf("harness up in %s: registry %s, containerd pid %d at %s", time.Since(start), env.Registry.Host(), env.Containerd.PID(), env.Containerd.Endpoint())
	defer func() { // after a failure only; Close is idempotent
		if t.Failed() {
			t.Logf("containerd log tail:\n%s", env.Containerd.LogTail())
		}
		_ = env.Close()
	}()

	containerd, err := procOf(env.Containerd.PID())
	if err != nil {
		t.Fatalf("containerd process: %v", err)
	}
	if err := env.PullImages(ctx, env.Containerd.Endpoint()); err != nil {
		t.Fatalf("pull: %v", err)
	}
	conn, err := Dial(env.Containerd.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rt := runtime.NewRuntimeServiceClient(conn)

	podID, ctrID := runSleep(ctx, t, rt, env.BusyboxImage)
	assertExec(ctx, t, rt, ctrID, []string{"ps", "-o", "pid,args"}, "1 sleep 3600")
	nsOut := assertExec(ctx, t, rt, ctrID, []string{"readlink", "/proc/self/ns/pid"}, "pid:[")
	hostNS, err := os.Readlink("/proc/self/ns/pid")
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(nsOut) == hostNS {
		t.Errorf("container shares the test's pid namespace %s", hostNS)
	}

	shims, err := env.Containerd.ShimPIDs()
	if err != nil || len(shims) == 0 {
		t.Fatalf("shims: %v %v", shims, err)
	}
	assertShimSockets(t, env.Containerd.Address(), true)
	dir := env.Containerd.Dir
	closeStart := time.Now()
	if err := env.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	t.Logf("closed in %s", time.Since(closeStart))
	assertGone(t, dir, append(shims, containerd))
	assertNoCgroups(t, podID, ctrID)
	if err := env.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

// TestRestartKeepsContainers restarts containerd under a running container,
// which must still answer exec; then SIGKILLs containerd, so that Stop has
// to kill the shims it left behind itself.
func TestRestartKeepsContainers(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: running containerd and runc needs root")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env := StartForTest(t)
	conn, err := Dial(env.Containerd.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rt := runtime.NewRuntimeServiceClient(conn)
	podID, ctrID := runSleep(ctx, t, rt, env.BusyboxImage)
	before := env.Containerd.PID()

	if err := env.Containerd.Restart(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if env.Containerd.PID() == before {
		t.Errorf("containerd pid %d unchanged by Restart", before)
	}
	assertExec(ctx, t, rt, ctrID, []string{"echo", "after restart"}, "after restart")

	shims, err := findShims(env.Containerd.Address())
	if err != nil || len(shims) == 0 {
		t.Fatalf("shims: %v %v", shims, err)
	}
	if err := env.Containerd.Kill(); err != nil {
		t.Fatalf("kill: %v", err)
	}
	dir := env.Containerd.Dir
	if err := env.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	var procs []Proc
	for _, s := range shims {
		procs = append(procs, s.proc)
		if _, err := os.Stat(s.socket()); !os.IsNotExist(err) {
			t.Errorf("shim socket %s left after Close: %v", s.socket(), err)
		}
	}
	assertGone(t, dir, procs)
	assertNoCgroups(t, podID, ctrID)
}

// TestParallelEnvs runs two Envs at once: closing one must not disturb
// the other.
func TestParallelEnvs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	first, second := StartForTest(t), StartForTest(t)
	var ctrs []string
	for _, env := range []*Env{first, second} {
		conn, err := Dial(env.Containerd.Endpoint())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_, ctrID := runSleep(ctx, t, runtime.NewRuntimeServiceClient(conn), env.BusyboxImage)
		ctrs = append(ctrs, ctrID)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("close first: %v", err)
	}
	conn, err := Dial(second.Containerd.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	assertExec(ctx, t, runtime.NewRuntimeServiceClient(conn), ctrs[1], []string{"echo", "still here"}, "still here")
}

// assertNoCgroups checks that no cgroup of the given pods or containers is
// left (CRI puts them at /k8s.io/<id> in every hierarchy).
func assertNoCgroups(t *testing.T, ids ...string) {
	t.Helper()
	for _, id := range ids {
		left, err := filepath.Glob("/sys/fs/cgroup/*/k8s.io/" + id)
		if err != nil || len(left) > 0 {
			t.Errorf("cgroups of %s left: %v %v", id, left, err)
		}
	}
}

// assertShimSockets checks whether the sockets of the shims of the
// containerd at address exist, as computed by shim.socket.
func assertShimSockets(t *testing.T, address string, want bool) {
	t.Helper()
	shims, err := findShims(address)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range shims {
		if _, err := os.Stat(s.socket()); (err == nil) != want {
			t.Errorf("shim %d socket %s: stat %v, want exists=%v", s.proc.PID, s.socket(), err, want)
		}
	}
}

// runSleep runs a host-network pod with one "sleep 3600" container in its
// own PID namespace and returns the pod's and the container's IDs.
func runSleep(ctx context.Context, t *testing.T, rt runtime.RuntimeServiceClient, image string) (podID, ctrID string) {
	t.Helper()
	podConfig := &runtime.PodSandboxConfig{
		Metadata: &runtime.PodSandboxMetadata{Name: "harness", Uid: "harness-uid", Namespace: "default"},
		Linux: &runtime.LinuxPodSandboxConfig{SecurityContext: &runtime.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtime.NamespaceOption{Network: runtime.NamespaceMode_NODE, Pid: runtime.NamespaceMode_POD},
		}},
	}
	pod, err := rt.RunPodSandbox(ctx, &runtime.RunPodSandboxRequest{Config: podConfig})
	if err != nil {
		t.Fatalf("run pod sandbox: %v", err)
	}
	ctr, err := rt.CreateContainer(ctx, &runtime.CreateContainerRequest{
		PodSandboxId:  pod.PodSandboxId,
		SandboxConfig: podConfig,
		Config: &runtime.ContainerConfig{
			Metadata: &runtime.ContainerMetadata{Name: "sleep"},
			Image:    &runtime.ImageSpec{Image: image},
			Command:  []string{"sleep", "3600"},
			Linux: &runtime.LinuxContainerConfig{SecurityContext: &runtime.LinuxContainerSecurityContext{
				NamespaceOptions: &runtime.NamespaceOption{Network: runtime.NamespaceMode_NODE, Pid: runtime.NamespaceMode_CONTAINER},
			}},
		},
	})
	if err != nil {
		t.Fatalf("create container: %v", err)
	}
	if _, err := rt.StartContainer(ctx, &runtime.StartContainerRequest{ContainerId: ctr.ContainerId}); err != nil {
		t.Fatalf("start container: %v", err)
	}
	return pod.PodSandboxId, ctr.ContainerId
}

// assertExec runs cmd in the container and checks its stdout contains want.
func assertExec(ctx context.Context, t *testing.T, rt runtime.RuntimeServiceClient, id string, cmd []string, want string) string {
	t.Helper()
	resp, err := rt.ExecSync(ctx, &runtime.ExecSyncRequest{ContainerId: id, Cmd: cmd, Timeout: 10})
	if err != nil {
		t.Fatalf("exec %v: %v", cmd, err)
	}
	out := string(resp.Stdout)
	t.Logf("exec %v: exit %d\n%s%s", cmd, resp.ExitCode, out, resp.Stderr)
	if resp.ExitCode != 0 || !strings.Contains(out, want) {
		t.Errorf("exec %v: exit %d, stdout %q; want exit 0 and %q", cmd, resp.ExitCode, out, want)
	}
	return out
}

// assertGone checks that no recorded process runs, nothing is mounted
// under dir and dir is gone.
func assertGone(t *testing.T, dir string, procs []Proc) {
	t.Helper()
	for _, p := range procs {
		if p.Alive() {
			t.Errorf("process %d still running after Close", p.PID)
		}
	}
	if left, err := findShims(socketPath(dir)); err != nil || len(left) > 0 {
		t.Errorf("shims left after Close: %v %v", left, err)
	}
	if mounts, err := MountsUnder(dir); err != nil || len(mounts) > 0 {
		t.Errorf("mounts left under %s: %v %v", dir, mounts, err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after Close: %v", dir, err)
	}
}

// A containerd that cannot start (here: no such binary) leaves no
// directory behind when StartWith made it. Other packages' tests may make
// theirs meanwhile: a dir left by this call is one made during it that is
// still empty a second later (containerd fills its own at once).
func TestStartFailureLeavesNoDir(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("skipping: running containerd and runc needs root")
	}
	before := map[string]bool{}
	old, _ := filepath.Glob("/tmp/nst-*")
	for _, d := range old {
		before[d] = true
	}
	_, err := StartWith(context.Background(), EnvOptions{Binary: "/nonexistent/containerd"})
	end := time.Now()
	if err == nil || !strings.Contains(err.Error(), "/nonexistent/containerd") {
		t.Fatalf("StartWith with no binary = %v, want an error naming it", err)
	}
	time.Sleep(time.Second)
	now, _ := filepath.Glob("/tmp/nst-*")
	for _, d := range now {
		fi, err := os.Stat(d)
		if before[d] || err != nil || fi.ModTime().After(end) {
			continue
		}
		if entries, err := os.ReadDir(d); err == nil && len(entries) == 0 {
			t.Errorf("the failed start left %s", d)
		}
	}
}
