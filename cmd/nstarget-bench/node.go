package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/cluster"
	"github.com/cri-nstarget/cri-nstarget/internal/critest"
	"github.com/cri-nstarget/cri-nstarget/internal/critesting"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// A busy node's steady state (`nstarget-bench node`, make bench-node): a
// real kubelet with a hundred running pods, its CRI endpoint the shim in
// one phase and the containerd behind it in the other, and nothing else
// asked of the node. What the shim costs such a node: its CPU time against
// containerd's, its resident set, and the latency of the kubelet's own CRI
// calls (relists, status and stats, as it makes them), read from the
// kubelet's metrics, both ways.
//
// One cluster (etcd, kube-apiserver, the kubelet) and one containerd with
// its runc; the pods are made once, through the shim, and run through both
// phases. The phases alternate in slices, A B B A (A: through the shim), so
// that the machine's drift falls on both; the kubelet is restarted on the
// other endpoint between them (the pods' containers are the runtime's and
// keep running), and each phase is measured after a warm-up. At the end,
// with the kubelet on the shim again, a CPU profile of the shim (perf).

type nodeOptions struct {
	shimBin    string
	kubeBin    string
	kubelet    string
	etcd       string
	containerd string
	pods       int
	duration   time.Duration // per side
	slices     int           // per side
	warmup     time.Duration // after the pods are up and after each kubelet restart
	profile    time.Duration // the shim's CPU profile at the end; 0: none
	out        string
}

// The two sides of the node measure.
const (
	viaShim   = iota // A: the kubelet's endpoint is the shim
	viaDirect        // B: containerd's own
	nNodeSides
)

var nodeSideNames = [nNodeSides]string{"through the shim", "direct"}

// nodeSlice is one stretch of the measure, on one side.
type nodeSlice struct {
	side int
	d    time.Duration
}

// slicePlan is the order of the measure: perSide on each side, in slices
// per side pieces, in the order A B B A A B B A ..., adjacent slices of the
// same side merged (no restart between them). One slice a side is A B.
func slicePlan(slices int, perSide time.Duration) []nodeSlice {
	var plan []nodeSlice
	d := perSide / time.Duration(slices)
	for j := range 2 * slices {
		side := viaShim
		if j%4 == 1 || j%4 == 2 {
			side = viaDirect
		}
		if n := len(plan); n > 0 && plan[n-1].side == side {
			plan[n-1].d += d
			continue
		}
		plan = append(plan, nodeSlice{side, d})
	}
	return plan
}

// The kubelet's metrics the measure reads.
const (
	runtimeOpsMetric = "kubelet_runtime_operations_duration_seconds" // by operation_type
	relistMetric     = "kubelet_pleg_relist_duration_seconds"
)

// The processes whose CPU time is measured.
const (
	procShim       = iota
	procContainerd // the daemon alone
	procRuncShims  // containerd-shim-runc-v2, one per pod
	procKubelet
	nProcs
)

var procNames = [nProcs]string{"cri-nstarget", "containerd (the daemon alone)", "containerd-shim-runc-v2 (one per pod, summed)", "kubelet"}

// sliceResult is what one slice measured.
type sliceResult struct {
	nodeSlice
	span     time.Duration
	cpu      [nProcs]time.Duration
	ops      scrape    // the kubelet's CRI calls in the slice, by operation
	relist   histogram // its relists
	gc       gcShare   // the shim's collections
	shimRSS  int64     // KiB, at the end
	ready    int       // pods Ready at the end
	restarts int       // their containers' restarts so far
}

func nodeCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("node", flag.ExitOnError)
	var o nodeOptions
	fs.StringVar(&o.shimBin, "shim-binary", "bin/cri-nstarget", "cri-nstarget binary")
	fs.StringVar(&o.kubeBin, "kubernetes-bin", "", "directory with kube-apiserver, kubectl and kubelet (hack/kubernetes.sh)")
	fs.StringVar(&o.kubelet, "kubelet", "", "kubelet binary (default: the one in --kubernetes-bin)")
	fs.StringVar(&o.etcd, "etcd", "", "etcd binary (hack/etcd.sh)")
	fs.StringVar(&o.containerd, "containerd", os.Getenv("NSTARGET_CONTAINERD"), "containerd binary (default $NSTARGET_CONTAINERD, else containerd); its runc: $NSTARGET_RUNC")
	fs.IntVar(&o.pods, "pods", 100, "running pods, a sleeping busybox container each (at most 110, the kubelet's maxPods)")
	fs.DurationVar(&o.duration, "duration", 10*time.Minute, "measured time per side")
	fs.IntVar(&o.slices, "slices", 2, "slices per side, in the order A B B A ... (A: through the shim); 1: A then B")
	fs.DurationVar(&o.warmup, "warmup", time.Minute, "left out of the measure after the pods are up and after each kubelet restart")
	fs.DurationVar(&o.profile, "profile", time.Minute, "after the measure, a CPU profile of the shim (perf) for this long, the kubelet on it; 0: none")
	fs.StringVar(&o.out, "out", "bin/bench-node", "where the summary, the shim's log and the profile go")
	fs.Parse(args)
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected arguments %v", fs.Args())
	case os.Geteuid() != 0:
		return errors.New("needs root (containerd, runc, the kubelet)")
	case o.kubeBin == "" || o.etcd == "":
		return errors.New("--kubernetes-bin and --etcd are required (make bench-node sets them)")
	case o.pods < 1 || o.pods > 110:
		return fmt.Errorf("--pods %d: from 1 to 110 (the kubelet's maxPods)", o.pods)
	case o.slices < 1 || o.duration/time.Duration(o.slices) < 10*time.Second:
		return fmt.Errorf("--duration %v in --slices %d: each slice at least 10s", o.duration, o.slices)
	}
	if o.containerd == "" {
		o.containerd = "containerd"
	}
	if o.profile > 0 {
		if _, err := exec.LookPath("perf"); err != nil {
			return fmt.Errorf("--profile needs perf (Debian: linux-perf), or --profile 0: %w", err)
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	n := &node{o: o, command: commandLine(append([]string{"node"}, args...)), started: time.Now(), m: machineFacts()}
	err := n.run(ctx)
	return errors.Join(err, n.teardown())
}

// node is one run of the measure; run sets it up and measures, teardown
// undoes what run did, whatever it reached.
type node struct {
	o       nodeOptions
	command string
	started time.Time
	m       machine

	tmp       string
	before    harness.Entries // the host's directories before the run
	watched   []string
	backend   *critest.Backend
	shim      *harness.Shim
	direct    runtimeapi.RuntimeServiceClient
	closeConn func() error
	kube      *cluster.Cluster
	side      int // where the kubelet's endpoint is now

	shimGC   gcLog
	versions string // containerd, runc, kubelet, shim

	kubeletMetrics string // the kubelet's /metrics URL
	scraper        *http.Client
}

func (n *node) run(ctx context.Context) error {
	cgroups, err := cluster.CgroupMounts()
	if err != nil {
		return err
	}
	n.watched = append(append([]string(nil), harness.KubeHostDirs...), cgroups...)
	n.before = harness.ListEntries(n.watched)
	if n.tmp, err = harness.TempDir("nsn-"); err != nil {
		return err
	}
	label, err := critest.BackendLabel(n.o.containerd)
	if err != nil {
		return err
	}
	setup, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	if n.backend, err = critest.StartBackend(setup, label, n.tmp, harness.EnvOptions{Dir: filepath.Join(n.tmp, "c"), Binary: n.o.containerd}, true); err != nil {
		return fmt.Errorf("start %s: %w", label, err)
	}
	conn, err := dial(n.backend.Containerd.Endpoint())
	if err != nil {
		return err
	}
	n.direct, n.closeConn = runtimeapi.NewRuntimeServiceClient(conn), conn.Close
	// as the unit runs it: log level info, metrics off, events with the
	// kubelet's identity (read when the first event is due: none here)
	kubeDir := filepath.Join(n.tmp, "k")
	s, version, err := startShim(setup, n.o.shimBin, filepath.Join(n.tmp, "s"), n.backend.Containerd,
		"--log-level", "info", "--events-kubeconfig", cluster.KubeletKubeconfig(kubeDir))
	if err != nil {
		return fmt.Errorf("start cri-nstarget: %w", err)
	}
	n.shim, n.shimGC = s, gcLog{path: s.LogPath()}
	if n.kube, err = cluster.Start(setup, cluster.Options{Dir: kubeDir, Bin: n.o.kubeBin, Kubelet: n.o.kubelet, Etcd: n.o.etcd, RuntimeEndpoint: s.Endpoint()}); err != nil {
		return fmt.Errorf("start the cluster: %w", err)
	}
	n.side = viaShim
	if err := n.kubeletClient(ctx); err != nil {
		return err
	}
	n.versions = n.describe(ctx, version)
	fmt.Printf("• %s\n", n.versions)

	t0 := time.Now()
	if err := n.kube.Apply(ctx, podsManifest(n.o.pods, n.backend.BusyboxImage)); err != nil {
		return err
	}
	if err := n.waitReady(ctx, time.Duration(n.o.pods)*3*time.Second+5*time.Minute); err != nil {
		return err
	}
	fmt.Printf("• %d pods running, through the shim, in %v\n", n.o.pods, time.Since(t0).Round(time.Second))
	_, hwmSetup := memKiB(s.PID())

	plan := slicePlan(n.o.slices, n.o.duration)
	var results []sliceResult
	for i, sl := range plan {
		if err := n.onSide(ctx, sl.side); err != nil {
			return err
		}
		if i == 0 {
			fmt.Printf("• warm-up %v ...\n", n.o.warmup)
			if err := sleep(ctx, n.o.warmup); err != nil {
				return err
			}
			// the peak resident set of the steady phases only, not of the
			// pods' creation
			if err := resetPeakRSS(s.PID()); err != nil {
				return fmt.Errorf("reset the shim's VmHWM: %w", err)
			}
		}
		fmt.Printf("• slice %d of %d: %s for %v ...\n", i+1, len(plan), nodeSideNames[sl.side], sl.d)
		r, err := n.measure(ctx, sl)
		if err != nil {
			return fmt.Errorf("slice %d (%s): %w", i+1, nodeSideNames[sl.side], err)
		}
		fmt.Printf("  shim %v CPU, containerd %v, kubelet %v; %.0f CRI calls, p99 %s; %d of %d pods Ready\n",
			round(r.cpu[procShim]), round(r.cpu[procContainerd]), round(r.cpu[procKubelet]), all(r.ops).count(), all(r.ops).quantileString(0.99), r.ready, n.o.pods)
		if r.ready != n.o.pods {
			return fmt.Errorf("slice %d: %d of %d pods Ready at its end", i+1, r.ready, n.o.pods)
		}
		results = append(results, r)
	}
	rss, hwm := memKiB(s.PID())
	var profile string
	if n.o.profile > 0 {
		if err := n.onSide(ctx, viaShim); err != nil {
			return err
		}
		fmt.Printf("• the shim's CPU profile, %v ...\n", n.o.profile)
		if profile, err = perfProfile(ctx, s.PID(), n.o.profile, n.o.out); err != nil {
			return err
		}
	}
	report := nodeReport{command: n.command, m: n.m, versions: n.versions, o: n.o, when: n.started, took: time.Since(n.started),
		slices: results, rss: rss, hwm: hwm, hwmSetup: hwmSetup, profile: profile}
	text, err := report.String()
	if err != nil {
		return err
	}
	fmt.Printf("\n%s", text)
	return os.WriteFile(filepath.Join(n.o.out, "summary.md"), []byte(text), 0o644)
}

// describe is what runs: containerd, runc, the kubelet, the shim.
func (n *node) describe(ctx context.Context, shimVersion string) string {
	ctrd := n.o.containerd
	if v, err := n.direct.Version(ctx, &runtimeapi.VersionRequest{}); err == nil {
		ctrd = v.GetRuntimeName() + " " + v.GetRuntimeVersion()
	}
	runc := "runc on containerd's PATH"
	if bin := os.Getenv("NSTARGET_RUNC"); bin != "" {
		if out, err := exec.Command(bin, "--version").Output(); err == nil {
			runc, _, _ = strings.Cut(string(out), "\n")
		}
	}
	return fmt.Sprintf("%s (private), %s, kubelet %s, %d pods; cri-nstarget %s", ctrd, runc, n.kube.KubeletVersion(), n.o.pods, shimVersion)
}

// onSide restarts the kubelet on side's endpoint, unless it is there, and
// waits out the warm-up.
func (n *node) onSide(ctx context.Context, side int) error {
	if n.side == side {
		return nil
	}
	endpoint := n.shim.Endpoint()
	if side == viaDirect {
		endpoint = n.backend.Containerd.Endpoint()
	}
	fmt.Printf("• the kubelet restarted on %s (%s), warm-up %v ...\n", endpoint, nodeSideNames[side], n.o.warmup)
	if err := n.kube.RestartKubeletOn(ctx, endpoint); err != nil {
		return err
	}
	n.side = side
	return sleep(ctx, n.o.warmup)
}

// measure runs one slice: the kubelet's metrics and the processes' CPU
// time at its start and its end.
func (n *node) measure(ctx context.Context, sl nodeSlice) (sliceResult, error) {
	r := sliceResult{nodeSlice: sl}
	ops0, relist0, err := n.scrapeKubelet(ctx)
	if err != nil {
		return r, err
	}
	pids := func() [nProcs][]int {
		var p [nProcs][]int
		p[procShim] = []int{n.shim.PID()}
		p[procContainerd] = []int{n.backend.Containerd.PID()}
		p[procKubelet] = []int{n.kube.KubeletPID()}
		if shims, err := n.backend.Containerd.ShimPIDs(); err == nil {
			for _, s := range shims {
				p[procRuncShims] = append(p[procRuncShims], s.PID)
			}
		}
		return p
	}()
	var cpu0 [nProcs]cpuSample
	for k := range pids {
		cpu0[k] = sampleCPU(pids[k]...)
	}
	n.shimGC.mark()
	t0 := time.Now()
	if err := sleep(ctx, sl.d); err != nil {
		return r, err
	}
	for k := range pids {
		r.cpu[k] = sampleCPU(pids[k]...).since(cpu0[k])
	}
	r.span = time.Since(t0)
	r.shimRSS, _ = memKiB(n.shim.PID())
	cycles, err := n.shimGC.since()
	if err != nil {
		return r, err
	}
	r.gc = sumGC(cycles)
	ops1, relist1, err := n.scrapeKubelet(ctx)
	if err != nil {
		return r, err
	}
	r.ops = scrape{}
	for op, h := range ops1 {
		if r.ops[op], err = h.sub(ops0[op]); err != nil {
			return r, fmt.Errorf("%s %s: %w", runtimeOpsMetric, op, err)
		}
	}
	if r.relist, err = relist1[""].sub(relist0[""]); err != nil {
		return r, fmt.Errorf("%s: %w", relistMetric, err)
	}
	r.ready, r.restarts, err = n.podsReady(ctx)
	return r, err
}

// kubeletClient is a client of the kubelet's own server (its /metrics):
// the kubelet serves on TLS and takes client certificates of the run's CA
// only (the apiserver's node proxy refuses a node at 127.0.0.1).
func (n *node) kubeletClient(ctx context.Context) error {
	kc, err := n.kube.UserKubeconfig("bench-scraper", "nstarget-bench")
	if err != nil {
		return err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		return fmt.Errorf("kubeconfig %s: %w", kc, err)
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return err
	}
	port, err := n.kube.Kubectl(ctx, "get", "node", cluster.NodeName, "-o", "jsonpath={.status.daemonEndpoints.kubeletEndpoint.Port}")
	if err != nil {
		return err
	}
	n.kubeletMetrics = "https://127.0.0.1:" + strings.TrimSpace(port) + "/metrics"
	n.scraper = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tlsConfig}}
	return nil
}

// scrapeKubelet reads the kubelet's metrics.
func (n *node) scrapeKubelet(ctx context.Context) (ops scrape, relist scrape, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, n.kubeletMetrics, nil)
	if err != nil {
		return nil, nil, err
	}
	resp, err := n.scraper.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, nil, fmt.Errorf("GET %s: %s: %.200s", n.kubeletMetrics, resp.Status, b)
	}
	text := string(b)
	if ops, err = parseHistograms(strings.NewReader(text), runtimeOpsMetric, "operation_type"); err != nil {
		return nil, nil, err
	}
	if len(ops) == 0 {
		return nil, nil, fmt.Errorf("the kubelet's metrics have no %s", runtimeOpsMetric)
	}
	relist, err = parseHistograms(strings.NewReader(text), relistMetric, "")
	return ops, relist, err
}

// podsReady counts the pods whose Ready condition is True, and their
// containers' restarts.
func (n *node) podsReady(ctx context.Context) (ready, restarts int, err error) {
	out, err := n.kube.Kubectl(ctx, "get", "pods", "--namespace", "default", "-o", "json")
	if err != nil {
		return 0, 0, err
	}
	var list struct {
		Items []struct {
			Status struct {
				Conditions        []struct{ Type, Status string }
				ContainerStatuses []struct{ RestartCount int }
			}
		}
	}
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		return 0, 0, fmt.Errorf("pods: %w", err)
	}
	for _, p := range list.Items {
		for _, c := range p.Status.Conditions {
			if c.Type == "Ready" && c.Status == "True" {
				ready++
			}
		}
		for _, c := range p.Status.ContainerStatuses {
			restarts += c.RestartCount
		}
	}
	return ready, restarts, nil
}

func (n *node) waitReady(ctx context.Context, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		ready, _, err := n.podsReady(ctx)
		if err == nil && ready == n.o.pods {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d pods Ready after %v (%v)", ready, n.o.pods, timeout, err)
		}
		if err := sleep(ctx, 5*time.Second); err != nil {
			return err
		}
	}
}

// podsManifest is count pods named busy-NNN on the node, each a busybox
// sleeping (the image the node already has), on the pod network, with no
// service-account token (no controller manager runs).
func podsManifest(count int, image string) string {
	items := make([]any, count)
	for i := range items {
		items[i] = map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": fmt.Sprintf("busy-%03d", i), "namespace": "default"},
			"spec": map[string]any{
				"nodeName":                      cluster.NodeName,
				"automountServiceAccountToken":  false,
				"enableServiceLinks":            false,
				"dnsPolicy":                     "Default",
				"terminationGracePeriodSeconds": 1,
				"containers": []any{map[string]any{
					"name": "sleep", "image": image, "imagePullPolicy": "IfNotPresent",
					"command": []string{"sleep", "2147483647"},
				}},
			},
		}
	}
	b, _ := json.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": items})
	return string(b)
}

// teardown undoes run, in order: the pods (through the kubelet), the
// cluster's processes, the sandboxes left (through containerd), the shim,
// containerd and the bridge, the cluster's cgroups; then checks that the
// machine is as found. The shim's log goes to --out.
func (n *node) teardown() error {
	var errs []error
	if n.kube != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		if _, err := n.kube.Kubectl(ctx, "delete", "pods", "--all", "--namespace", "default", "--grace-period=1", "--wait", "--timeout=5m"); err != nil {
			errs = append(errs, err)
		}
		cancel()
		if err := n.kube.Stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop the cluster: %w", err))
		}
	}
	if n.direct != nil && n.kube != nil {
		if err := critesting.RemoveSandboxes(n.direct); err != nil {
			errs = append(errs, err)
		}
	}
	if n.shim != nil {
		if b, err := os.ReadFile(n.shim.LogPath()); err == nil {
			os.WriteFile(filepath.Join(n.o.out, "shim.log"), b, 0o644)
		}
		if err := n.shim.Close(); err != nil {
			errs = append(errs, fmt.Errorf("stop cri-nstarget: %w", err))
		}
	}
	if n.closeConn != nil {
		n.closeConn()
	}
	if n.backend != nil {
		if err := n.backend.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	if n.kube != nil {
		if err := n.kube.Close(); err != nil {
			errs = append(errs, fmt.Errorf("remove the cluster's host state: %w", err))
		}
		if left := n.kube.Residue(); len(left) > 0 {
			errs = append(errs, fmt.Errorf("left behind by the cluster: %v", left))
		}
	}
	if n.tmp != "" {
		if len(errs) > 0 {
			if err := harness.KeepLogs(n.tmp, filepath.Join(n.o.out, "logs")); err == nil {
				fmt.Fprintf(os.Stderr, "nstarget-bench node: the components' logs are in %s\n", filepath.Join(n.o.out, "logs"))
			}
		}
		if leaked, _ := harness.MountsUnder(n.tmp); len(leaked) > 0 {
			errs = append(errs, fmt.Errorf("mounts left under %s: %v", n.tmp, leaked))
			_ = harness.UnmountAll(n.tmp)
		}
		if left := harness.ProcessesNaming(n.tmp); len(left) > 0 {
			errs = append(errs, fmt.Errorf("processes left running: %v", left))
		}
		os.RemoveAll(n.tmp)
	}
	if n.watched != nil {
		if added := n.before.Added(harness.ListEntries(n.watched)); len(added) > 0 {
			errs = append(errs, fmt.Errorf("new entries outside the run's directory: %v", added))
		}
	}
	return errors.Join(errs...)
}

// perfProfile records the CPU profile of pid for d with Linux perf (call
// graphs by frame pointer, which Go keeps; 4999 Hz, since an idle node's
// shim is on a CPU well under 1% of the time) into out/shim.perf.data and
// returns the top of perf report: by binary and kernel, and by function.
func perfProfile(ctx context.Context, pid int, d time.Duration, out string) (string, error) {
	data := filepath.Join(out, "shim.perf.data")
	rec := exec.CommandContext(ctx, "perf", "record", "-F", "4999", "-g", "-p", fmt.Sprint(pid), "-o", data, "--", "sleep", fmt.Sprint(d.Seconds()))
	if b, err := rec.CombinedOutput(); err != nil {
		return "", fmt.Errorf("perf record: %w: %s", err, b)
	}
	var parts []string
	for _, sort := range []string{"dso", "symbol"} {
		rep := exec.CommandContext(ctx, "perf", "report", "-i", data, "--stdio", "--no-children", "-g", "none", "--sort", sort, "--percent-limit", "1")
		var stdout, stderr bytes.Buffer
		rep.Stdout, rep.Stderr = &stdout, &stderr
		if err := rep.Run(); err != nil {
			return "", fmt.Errorf("perf report: %w: %s", err, stderr.String())
		}
		parts = append(parts, perfTop(stdout.String(), 25))
	}
	report := strings.Join(parts, "\n")
	return report, os.WriteFile(filepath.Join(out, "shim.perf.txt"), []byte(report), 0o644)
}

// perfTop keeps the sample count and the first n entries of a perf report.
func perfTop(report string, n int) string {
	var kept []string
	entries := 0
	for _, line := range strings.Split(report, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, "# Samples:"):
			kept = append(kept, t)
		case t == "" || strings.HasPrefix(t, "#"):
		case entries < n:
			// -g none leaves empty call-graph columns ("-") at the end
			kept = append(kept, strings.TrimRight(t, " -"))
			entries++
		}
	}
	return strings.Join(kept, "\n") + "\n"
}

// sleep waits d, or less if ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
