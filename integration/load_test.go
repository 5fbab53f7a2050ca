//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// procFigures are what the load test watches in the shim process.
type procFigures struct {
	fds, threads int
	rssKiB       int
}

func figures(t *testing.T, pid int) procFigures {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := procFigures{fds: len(fds)}
	for _, line := range strings.Split(string(st), "\n") {
		k, v, _ := strings.Cut(line, ":")
		n, _ := strconv.Atoi(strings.Fields(v + " 0")[0])
		switch k {
		case "Threads":
			f.threads = n
		case "VmRSS":
			f.rssKiB = n
		}
	}
	return f
}

// 64 clients (NST_LOAD_CLIENTS) for NST_LOAD_SECONDS (default 30) each run
// whole pod lifecycles with a targeted debug container through the shim:
// zero errors, and afterwards no sandbox, container or pin left, and the
// shim's file descriptors back where they were.
func TestLoad(t *testing.T) {
	clients := envInt("NST_LOAD_CLIENTS", 64)
	duration := time.Duration(envInt("NST_LOAD_SECONDS", 30)) * time.Second
	s := startShim(t, "--log-level", "info", "--metrics-address", "127.0.0.1:0")
	metrics := "http://" + metricsAddr(t, s.LogPath()) + "/metrics"
	goroutines := func() int {
		_, text := httpGet(t, metrics)
		n, _ := strconv.Atoi(metricValue(text, "go_goroutines"))
		return n
	}
	c := shimCRI(s)
	sandboxes := func() int {
		r, err := direct.rt.ListPodSandbox(ctx(t), &runtimeapi.ListPodSandboxRequest{})
		if err != nil {
			t.Fatal(err)
		}
		return len(r.GetItems())
	}
	baseSandboxes, baseContainers := sandboxes(), len(containerIDs(t))
	// one lifecycle first, so that the shim's lazily made connections
	// (backend CRI, containerd API) exist before the baseline is taken
	if err := lifecycle(c, fmt.Sprintf("load-%d-warmup", os.Getpid())); err != nil {
		t.Fatal(err)
	}
	goBefore := goroutines() // first: its HTTP connection stays open, counted in both fd figures
	before := figures(t, s.PID())

	var lifecycles, errCount atomic.Int64
	var peak procFigures
	var mu sync.Mutex
	var firstErrs []string
	fail := func(err error) {
		errCount.Add(1)
		mu.Lock()
		if len(firstErrs) < 10 {
			firstErrs = append(firstErrs, err.Error())
		}
		mu.Unlock()
	}
	stop := time.Now().Add(duration)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; time.Now().Before(stop); n++ {
				if err := lifecycle(c, fmt.Sprintf("load-%d-%d-%d", os.Getpid(), i, n)); err != nil {
					fail(err)
					continue
				}
				lifecycles.Add(1)
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case <-done:
				return
			case <-time.After(500 * time.Millisecond):
				f := figures(t, s.PID())
				mu.Lock()
				peak.fds, peak.threads, peak.rssKiB = max(peak.fds, f.fds), max(peak.threads, f.threads), max(peak.rssKiB, f.rssKiB)
				mu.Unlock()
			}
		}
	}()
	wg.Wait()
	close(done)

	for deadline := time.Now().Add(10 * time.Second); figures(t, s.PID()).fds > before.fds && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
	goAfter := goroutines()
	for deadline := time.Now().Add(10 * time.Second); goAfter > goBefore && time.Now().Before(deadline); goAfter = goroutines() {
		time.Sleep(100 * time.Millisecond)
	}
	after := figures(t, s.PID())
	if after.fds > before.fds {
		t.Errorf("shim fds: %d before, %d after: %v", before.fds, after.fds, fdTargets(s.PID()))
	}
	t.Logf("%d clients, %v: %d pod lifecycles (each: sandbox, app, targeted debug, teardown), %d errors",
		clients, duration, lifecycles.Load(), errCount.Load())
	t.Logf("shim fds before/peak/after: %d/%d/%d; goroutines %d/-/%d; threads %d/%d/%d; RSS KiB %d/%d/%d",
		before.fds, peak.fds, after.fds, goBefore, goAfter, before.threads, peak.threads, after.threads, before.rssKiB, peak.rssKiB, after.rssKiB)
	if goAfter > goBefore {
		t.Errorf("shim goroutines: %d before, %d after", goBefore, goAfter)
	}
	if errCount.Load() > 0 {
		t.Errorf("%d errors, first ones: %v", errCount.Load(), firstErrs)
	}
	if lifecycles.Load() == 0 {
		t.Error("no lifecycle completed")
	}
	if got := sandboxes(); got != baseSandboxes {
		t.Errorf("sandboxes in containerd: %d after, %d before", got, baseSandboxes)
	}
	if got := len(containerIDs(t)); got != baseContainers {
		t.Errorf("containers in containerd: %d after, %d before", got, baseContainers)
	}
	if m := mountsUnder(t, s.StateDir()); len(m) > 0 {
		t.Errorf("pins left: %d", len(m))
	}
}

// lifecycle runs one pod through the shim: sandbox, app in its own PID
// namespace, debug container targeting it, teardown.
func lifecycle(c cri, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Uid: name, Namespace: "load"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: ownMode}}},
	}
	sb, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return fmt.Errorf("%s RunPodSandbox: %w", name, err)
	}
	defer func() {
		c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.GetPodSandboxId()})
		c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.GetPodSandboxId()})
	}()
	start := func(cname string, ns *runtimeapi.NamespaceOption) (string, error) {
		r, err := c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.GetPodSandboxId(), SandboxConfig: cfg,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: cname}, Image: &runtimeapi.ImageSpec{Image: env.BusyboxImage},
				Command: []string{"sleep", "3600"},
				Linux:   &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}}}})
		if err != nil {
			return "", fmt.Errorf("%s CreateContainer %s: %w", name, cname, err)
		}
		if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: r.GetContainerId()}); err != nil {
			return "", fmt.Errorf("%s StartContainer %s: %w", name, cname, err)
		}
		return r.GetContainerId(), nil
	}
	app, err := start("app", pidOwn)
	if err != nil {
		return err
	}
	dbg, err := start("debug", targetOf(app))
	if err != nil {
		return err
	}
	if _, err := c.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: dbg, Timeout: 0}); err != nil {
		return fmt.Errorf("%s StopContainer: %w", name, err)
	}
	if _, err := c.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: dbg}); err != nil {
		return fmt.Errorf("%s RemoveContainer: %w", name, err)
	}
	if _, err := c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.GetPodSandboxId()}); err != nil {
		return fmt.Errorf("%s StopPodSandbox: %w", name, err)
	}
	if _, err := c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.GetPodSandboxId()}); err != nil {
		return fmt.Errorf("%s RemovePodSandbox: %w", name, err)
	}
	return nil
}

// fdTargets counts a process's open files by what they are.
func fdTargets(pid int) map[string]int {
	out := map[string]int{}
	entries, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	for _, e := range entries {
		l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, e.Name()))
		if i := strings.IndexAny(l, ":["); i > 0 && !strings.HasPrefix(l, "/") {
			l = l[:i]
		}
		out[l]++
	}
	return out
}
