//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/critesting"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
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

// 64 clients (NST_LOAD_CLIENTS), each on its own connection, for
// NST_LOAD_SECONDS (default 30) each run whole pod lifecycles with a
// targeted debug container through the shim: every debug container joins
// its target's PID namespace (a fallback under load is a failure), zero
// errors, and afterwards no sandbox, container or pin left, and the shim's
// file descriptors back where they were.
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
		r, err := direct.Runtime.ListPodSandbox(ctx(t), &runtimeapi.ListPodSandboxRequest{})
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

	var lifecycles, errCount, notJoined atomic.Int64
	var peak procFigures
	peakConns := 0
	var mu sync.Mutex
	var firstErrs []string
	fail := func(err error) {
		errCount.Add(1)
		if errors.Is(err, errNotJoined) {
			notJoined.Add(1)
		}
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
			// a connection of its own, as each kubelet (or crictl) has
			conn, err := harness.Dial(s.Endpoint())
			if err != nil {
				fail(err)
				return
			}
			defer conn.Close()
			c := critesting.New(conn)
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
				n := socketConns(t, s.Socket())
				mu.Lock()
				peak.fds, peak.threads, peak.rssKiB = max(peak.fds, f.fds), max(peak.threads, f.threads), max(peak.rssKiB, f.rssKiB)
				peakConns = max(peakConns, n)
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
	t.Logf("%d clients, %v: %d pod lifecycles (each: sandbox, app, targeted debug joining the app's PID namespace, teardown), %d errors (%d debug containers not in their target's PID namespace)",
		clients, duration, lifecycles.Load(), errCount.Load(), notJoined.Load())
	t.Logf("connections to the shim's socket at most %d at once (the %d clients' own, and the test's)", peakConns, clients)
	t.Logf("shim fds before/peak/after: %d/%d/%d; goroutines %d/-/%d; threads %d/%d/%d; RSS KiB %d/%d/%d",
		before.fds, peak.fds, after.fds, goBefore, goAfter, before.threads, peak.threads, after.threads, before.rssKiB, peak.rssKiB, after.rssKiB)
	leaked := goAfter > goBefore
	if leaked {
		t.Errorf("shim goroutines: %d before, %d after", goBefore, goAfter)
	}
	if errCount.Load() > 0 {
		t.Errorf("%d errors, first ones: %v", errCount.Load(), firstErrs)
	}
	if lifecycles.Load() == 0 {
		t.Error("no lifecycle completed")
	}
	if peakConns < clients {
		t.Errorf("at most %d connections to the shim at once, want the %d clients' own", peakConns, clients)
	}
	// what the shim says it did agrees with what the containers show
	_, text := httpGet(t, metrics)
	if targeted, fellBack := targetingCount(text, "targeted"), targetingCount(text, "fallback"); fellBack != 0 || targeted != int(lifecycles.Load())+1 {
		t.Errorf("the shim counted %d targeted and %d fallback pid creates, want %d (the lifecycles and the warm-up) and 0", targeted, fellBack, lifecycles.Load()+1)
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
	if leaked {
		// last: the dump ends the shim
		t.Logf("the shim's goroutines (SIGQUIT):\n%s", s.Quit())
	}
}

// lifecycle runs one pod through the shim: sandbox, app in its own PID
// namespace, debug container targeting it, teardown.
func lifecycle(c critesting.CRI, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Uid: name, Namespace: "load"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: ownMode}}},
	}
	sb, err := c.Runtime.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return fmt.Errorf("%s RunPodSandbox: %w", name, err)
	}
	defer func() {
		c.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.GetPodSandboxId()})
		c.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.GetPodSandboxId()})
	}()
	start := func(cname string, ns *runtimeapi.NamespaceOption) (string, error) {
		r, err := c.Runtime.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb.GetPodSandboxId(), SandboxConfig: cfg,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: cname}, Image: &runtimeapi.ImageSpec{Image: env.BusyboxImage},
				Command: []string{"sleep", "3600"},
				Linux:   &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}}}})
		if err != nil {
			return "", fmt.Errorf("%s CreateContainer %s: %w", name, cname, err)
		}
		if _, err := c.Runtime.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: r.GetContainerId()}); err != nil {
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
	if err := joined(ctx, c, sb.GetPodSandboxId(), app, dbg); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	if _, err := c.Runtime.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: dbg, Timeout: 0}); err != nil {
		return fmt.Errorf("%s StopContainer: %w", name, err)
	}
	if _, err := c.Runtime.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: dbg}); err != nil {
		return fmt.Errorf("%s RemoveContainer: %w", name, err)
	}
	if _, err := c.Runtime.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.GetPodSandboxId()}); err != nil {
		return fmt.Errorf("%s StopPodSandbox: %w", name, err)
	}
	if _, err := c.Runtime.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.GetPodSandboxId()}); err != nil {
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

// errNotJoined: a debug container is not in its target's PID namespace.
var errNotJoined = errors.New("debug container not in its target's PID namespace")

// joined checks, from the host, that the debug container is in the app's
// PID namespace, which is not the pod's (or the check would prove nothing).
func joined(ctx context.Context, c critesting.CRI, sandbox, app, dbg string) error {
	podNS, err := pidNSOf(ctx, c, sandbox, true)
	if err != nil {
		return err
	}
	appNS, err := pidNSOf(ctx, c, app, false)
	if err != nil {
		return err
	}
	dbgNS, err := pidNSOf(ctx, c, dbg, false)
	if err != nil {
		return err
	}
	if appNS == podNS {
		return fmt.Errorf("the app is in the pod's PID namespace %s: nothing to target", podNS)
	}
	if dbgNS != appNS {
		return fmt.Errorf("%w: in %s, the target's is %s (the pod's %s)", errNotJoined, dbgNS, appNS, podNS)
	}
	return nil
}

// pidNSOf is the PID namespace link of a container's (or sandbox's) process,
// through c's verbose status.
func pidNSOf(ctx context.Context, c critesting.CRI, id string, sandbox bool) (string, error) {
	var raw string
	if sandbox {
		r, err := c.Runtime.PodSandboxStatus(ctx, &runtimeapi.PodSandboxStatusRequest{PodSandboxId: id, Verbose: true})
		if err != nil {
			return "", fmt.Errorf("PodSandboxStatus %s: %w", id, err)
		}
		raw = r.GetInfo()["info"]
	} else {
		r, err := c.Runtime.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
		if err != nil {
			return "", fmt.Errorf("ContainerStatus %s: %w", id, err)
		}
		raw = r.GetInfo()["info"]
	}
	var info struct {
		Pid int `json:"pid"`
	}
	if err := json.Unmarshal([]byte(raw), &info); err != nil || info.Pid == 0 {
		return "", fmt.Errorf("pid of %s: %v (verbose info %.200q)", id, err, raw)
	}
	l, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", info.Pid))
	if err != nil {
		return "", fmt.Errorf("pid namespace of %s: %w", id, err)
	}
	return l, nil
}

// targetingCount sums the shim's pid targeting decisions of one result
// (targeted, fallback, refused) over stages and reasons.
func targetingCount(metrics, result string) int {
	n := 0
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "cri_nstarget_targeting_total{") && strings.Contains(line, `namespace="pid"`) && strings.Contains(line, `result="`+result+`"`) {
			v, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			n += int(v)
		}
	}
	return n
}

// socketConns counts the connections accepted on a unix socket and still
// open (in /proc/net/unix, accepted sockets carry the listener's path).
func socketConns(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(b), "\n") {
		// Num RefCount Protocol Flags Type St Inode Path; St 03: connected
		f := strings.Fields(line)
		if len(f) == 8 && f[7] == path && f[5] == "03" {
			n++
		}
	}
	return n
}
