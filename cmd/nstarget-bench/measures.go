package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

type bench struct {
	o            options
	direct, shim side
	results      []result
	pods         int
	// a pod on the direct side holding idle containers, for the read-only
	// measures; one is the container asked about
	fillPod string
	fillCfg *runtimeapi.PodSandboxConfig
	filled  int
	one     string
}

// result is one line of the table.
type result struct {
	measure string
	direct  stats
	shim    stats
	figure  string // the figure compared with the target
	target  string
	ok      bool
}

type stats struct {
	n             int
	min, med, p99 time.Duration
}

// shift is the median of the differences b[j] - a[i] over all pairs: how
// much later b runs than a, robust to outliers and to mixed modes.
func shift(a, b []time.Duration) time.Duration {
	diffs := make([]time.Duration, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			diffs = append(diffs, y-x)
		}
	}
	if len(diffs) == 0 {
		return 0
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i] < diffs[j] })
	return diffs[len(diffs)/2]
}

func summarize(ds []time.Duration) stats {
	if len(ds) == 0 {
		return stats{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	p99 := s[min(len(s)-1, (len(s)*99)/100)]
	return stats{n: len(s), min: s[0], med: s[len(s)/2], p99: p99}
}

func (b *bench) all(ctx context.Context) error {
	fmt.Printf("rounds: %d lifecycles and TARGET creates per side, %d unary calls per side, %d clients x %v per side\n\n",
		b.o.count, b.o.calls, b.o.clients, b.o.duration)
	defer func() {
		if b.fillPod != "" {
			b.removePod(b.direct, b.fillPod)
		}
	}()
	// ListContainers scaling is measured while the idle pod grows: the
	// points below --containers first, the rest after the other measures.
	var below, above []int
	for _, n := range b.o.sandboxSize {
		if n < b.o.containers {
			below = append(below, n)
		} else {
			above = append(above, n)
		}
	}
	steps := []struct {
		name string
		run  func(context.Context) error
	}{{"lifecycle", b.lifecycle}, {"target", b.target},
		{"scaling", func(ctx context.Context) error { return b.scaling(ctx, below) }}, {"unary", b.unary}, {"throughput", b.throughput},
		{"scaling", func(ctx context.Context) error { return b.scaling(ctx, above) }}}
	for _, step := range steps {
		if b.o.only != "" && !slices.Contains(strings.Split(b.o.only, ","), step.name) {
			continue
		}
		if err := step.run(ctx); err != nil {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	b.print()
	return nil
}

// pod makes a sandbox through c (host network, own pid namespaces).
func (b *bench) pod(ctx context.Context, c side) (string, *runtimeapi.PodSandboxConfig, error) {
	b.pods++
	name := fmt.Sprintf("bench-%d-%d", os.Getpid(), b.pods)
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: name, Uid: name, Namespace: "bench"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER}}},
	}
	r, err := c.rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return "", nil, fmt.Errorf("%s RunPodSandbox: %w", c.name, err)
	}
	return r.GetPodSandboxId(), cfg, nil
}

func (b *bench) removePod(c side, id string) {
	ctx := context.Background()
	c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: id})
	c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: id})
}

func (b *bench) container(ctx context.Context, c side, sb string, cfg *runtimeapi.PodSandboxConfig, name string, ns *runtimeapi.NamespaceOption) (string, error) {
	r, err := c.rt.CreateContainer(ctx, &runtimeapi.CreateContainerRequest{PodSandboxId: sb, SandboxConfig: cfg,
		Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: b.o.image},
			Command: []string{"sleep", "3600"},
			Linux:   &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}}}})
	if err != nil {
		return "", fmt.Errorf("%s CreateContainer: %w", c.name, err)
	}
	return r.GetContainerId(), nil
}

// lifecycle: the seven calls of a pod's life, wall time, alternating sides.
func (b *bench) lifecycle(ctx context.Context) error {
	fmt.Println("• pod lifecycle ...")
	var ds [2][]time.Duration
	for i := 0; i < 2*b.o.count; i++ {
		c := []side{b.direct, b.shim}[i%2]
		start := time.Now()
		sb, cfg, err := b.pod(ctx, c)
		if err != nil {
			return err
		}
		id, err := b.container(ctx, c, sb, cfg, "app", &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER})
		if err == nil {
			_, err = c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id})
		}
		if err == nil {
			_, err = c.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0})
		}
		if err == nil {
			_, err = c.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
		}
		if err == nil {
			_, err = c.rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb})
		}
		if err == nil {
			_, err = c.rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb})
		}
		if err != nil {
			b.removePod(c, sb)
			return fmt.Errorf("lifecycle via %s: %w", c.name, err)
		}
		ds[i%2] = append(ds[i%2], time.Since(start))
	}
	d, s := summarize(ds[0]), summarize(ds[1])
	ratio := float64(s.med) / float64(d.med)
	b.results = append(b.results, result{measure: "pod lifecycle (7 calls)", direct: d, shim: s,
		figure: fmt.Sprintf("shim/direct %.3f", ratio), target: "<= 1.02", ok: ratio <= 1.02})
	return nil
}

// target: CreateContainer+StartContainer through the shim, pid TARGET
// against the same without.
func (b *bench) target(ctx context.Context) error {
	fmt.Println("• TARGET create+start ...")
	sb, cfg, err := b.pod(ctx, b.shim)
	if err != nil {
		return err
	}
	defer b.removePod(b.shim, sb)
	app, err := b.container(ctx, b.shim, sb, cfg, "app", &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER})
	if err != nil {
		return err
	}
	if _, err := b.shim.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: app}); err != nil {
		return err
	}
	// Rounds of three kinds, interleaved: POD and TARGET through the shim,
	// and TARGET directly, which containerd 1.6 handles itself (pid only):
	// the same namespace joined, so that the last two differ by the shim's
	// own work.
	var ds, creates, starts [3][]time.Duration
	for i := 0; i < 3*b.o.count; i++ {
		k, c := i%3, b.shim
		ns := &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: app}
		switch k {
		case 0:
			ns = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_POD}
		case 2:
			c = b.direct
		}
		start := time.Now()
		id, err := b.container(ctx, c, sb, cfg, fmt.Sprintf("c%d", i), ns)
		if err != nil {
			return err
		}
		created := time.Now()
		if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
			return err
		}
		ds[k] = append(ds[k], time.Since(start))
		creates[k] = append(creates[k], created.Sub(start))
		starts[k] = append(starts[k], time.Since(created))
		c.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0})
		c.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	}
	plain, tgt := summarize(ds[0]), summarize(ds[1])
	// The figure is the median of all differences TARGET - POD (the
	// Hodges-Lehmann shift): create times here are bimodal (about 6 and
	// 16 ms), and the difference of two medians jumps with the mix.
	extra := shift(ds[0], ds[1])
	b.results = append(b.results, result{measure: "create+start: POD (left) vs TARGET (right), via shim", direct: plain, shim: tgt,
		figure: fmt.Sprintf("TARGET extra %v (medians: %v)", extra.Round(10*time.Microsecond), (tgt.med - plain.med).Round(10*time.Microsecond)),
		target: "<= 2ms p50", ok: extra <= 2*time.Millisecond})
	medExtra := func(d [3][]time.Duration) time.Duration { return shift(d[0], d[1]).Round(10 * time.Microsecond) }
	b.results = append(b.results, result{measure: "  TARGET: CreateContainer (left), StartContainer", direct: summarize(creates[1]), shim: summarize(starts[1]),
		figure: fmt.Sprintf("extra %v / %v", medExtra(creates), medExtra(starts)), target: "(split of the above)"})
	own := func(d [3][]time.Duration) time.Duration { return shift(d[2], d[1]).Round(10 * time.Microsecond) }
	b.results = append(b.results, result{measure: "create+start TARGET: containerd's own (left) vs shim", direct: summarize(ds[2]), shim: tgt,
		figure: fmt.Sprintf("shim +%v (create +%v, start +%v)", own(ds), own(creates), own(starts)), target: "(the shim's own work)"})
	return nil
}

// unary: added latency of single calls, alternating blocks of 50 calls.
func (b *bench) unary(ctx context.Context) error {
	fmt.Printf("• unary latency (with %d containers present) ...\n", b.o.containers)
	if err := b.fill(ctx, b.o.containers); err != nil {
		return err
	}
	one := b.one
	calls := []struct {
		name string
		call func(side) error
	}{
		{"Version", func(c side) error { _, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{}); return err }},
		{"ContainerStatus", func(c side) error {
			_, err := c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: one})
			return err
		}},
		{fmt.Sprintf("ListContainers (%d)", b.o.containers), func(c side) error {
			_, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			return err
		}},
	}
	for _, call := range calls {
		var ds [2][]time.Duration
		for i := 0; i < 50; i++ { // warm up both
			call.call(b.direct)
			call.call(b.shim)
		}
		for block := 0; block < 2*b.o.calls/50; block++ {
			c := []side{b.direct, b.shim}[block%2]
			for i := 0; i < 50; i++ {
				start := time.Now()
				if err := call.call(c); err != nil {
					return fmt.Errorf("%s via %s: %w", call.name, c.name, err)
				}
				ds[block%2] = append(ds[block%2], time.Since(start))
			}
		}
		d, s := summarize(ds[0]), summarize(ds[1])
		p50, p99 := s.med-d.med, s.p99-d.p99
		b.results = append(b.results, result{measure: call.name + " latency", direct: d, shim: s,
			figure: fmt.Sprintf("added p50 %v, p99 %v", p50.Round(time.Microsecond), p99.Round(time.Microsecond)),
			target: "<= 50us p50, <= 200us p99", ok: p50 <= 50*time.Microsecond && p99 <= 200*time.Microsecond})
	}
	return nil
}

// throughput: clients issuing ListContainers and ContainerStatus for the
// duration, sides alternating in four slices each; the shim's peak RSS.
func (b *bench) throughput(ctx context.Context) error {
	fmt.Printf("• %d-client throughput (with %d containers present) ...\n", b.o.clients, b.o.containers)
	if err := b.fill(ctx, b.o.containers); err != nil { // a no-op after unary
		return err
	}
	one := b.one
	var ops, fails [2]int64
	var firstErr [2]error
	var elapsed [2]time.Duration
	var peakRSS atomic.Int64
	stopRSS := make(chan struct{})
	go func() {
		for {
			select {
			case <-stopRSS:
				return
			case <-time.After(100 * time.Millisecond):
				if kib := rssKiB(b.o.shimPID); kib > peakRSS.Load() {
					peakRSS.Store(kib)
				}
			}
		}
	}()
	// Short alternating slices (one second, at least 8 a side), so that the
	// VM's drifting speed falls on both sides alike.
	slices := max(8, int(b.o.duration/time.Second))
	slice := b.o.duration / time.Duration(slices)
	for round := 0; round < 2*slices; round++ {
		c := []side{b.direct, b.shim}[round%2]
		var n, failed atomic.Int64
		var errOnce sync.Once
		deadline := time.Now().Add(slice)
		start := time.Now()
		var wg sync.WaitGroup
		for i := 0; i < b.o.clients; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for k := 0; time.Now().Before(deadline); k++ {
					var err error
					if k%2 == 0 {
						_, err = c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
					} else {
						_, err = c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: one})
					}
					if err == nil {
						n.Add(1)
					} else {
						failed.Add(1)
						errOnce.Do(func() { firstErr[round%2] = err })
					}
				}
			}()
		}
		wg.Wait()
		ops[round%2] += n.Load()
		fails[round%2] += failed.Load()
		elapsed[round%2] += time.Since(start)
		if b.o.verbose {
			fmt.Printf("  slice %d %s: %.0f calls/s, %d failed\n", round, c.name, float64(n.Load())/time.Since(start).Seconds(), failed.Load())
		}
	}
	close(stopRSS)
	for i, name := range []string{"direct", "shim"} {
		if fails[i] > 0 {
			return fmt.Errorf("throughput: %d calls failed %s, first: %v", fails[i], name, firstErr[i])
		}
	}
	d := float64(ops[0]) / elapsed[0].Seconds()
	s := float64(ops[1]) / elapsed[1].Seconds()
	b.results = append(b.results, result{measure: fmt.Sprintf("%d clients ListContainers/ContainerStatus", b.o.clients),
		figure: fmt.Sprintf("%.0f vs %.0f calls/s: shim/direct %.3f", d, s, s/d), target: ">= 0.95", ok: s/d >= 0.95})
	if b.o.shimPID > 0 {
		mib := float64(peakRSS.Load()) / 1024
		b.results = append(b.results, result{measure: "shim RSS under that load", figure: fmt.Sprintf("peak %.1f MiB", mib), target: "<= 25 MiB", ok: mib <= 25})
	}
	return nil
}

// scaling: ListContainers added latency at several container counts, each
// in its own pod, alternating sides.
func (b *bench) scaling(ctx context.Context, points []int) error {
	fmt.Println("• ListContainers scaling ...")
	for _, n := range points {
		if n < b.filled {
			continue
		}
		if err := b.fill(ctx, n); err != nil {
			return err
		}
		var ds [2][]time.Duration
		for block := 0; block < 20; block++ {
			c := []side{b.direct, b.shim}[block%2]
			for i := 0; i < 25; i++ {
				start := time.Now()
				if _, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{}); err != nil {
					return err
				}
				ds[block%2] = append(ds[block%2], time.Since(start))
			}
		}
		d, s := summarize(ds[0]), summarize(ds[1])
		b.results = append(b.results, result{measure: fmt.Sprintf("ListContainers at %d containers", b.filled), direct: d, shim: s,
			figure: fmt.Sprintf("added p50 %v", (s.med - d.med).Round(time.Microsecond)), target: "(scaling)", ok: true})
	}
	return nil
}

func (b *bench) print() {
	fmt.Printf("\n%-52s %-30s %-30s %-36s %-26s %s\n", "measure", "direct min/med/p99", "shim min/med/p99", "figure", "target", "")
	for _, r := range b.results {
		mark := "met"
		if !r.ok {
			mark = "MISSED"
		}
		if strings.HasPrefix(r.target, "(") {
			mark = ""
		}
		fmt.Printf("%-52s %-30s %-30s %-36s %-26s %s\n", r.measure, r.direct, r.shim, r.figure, r.target, mark)
	}
}

func (s stats) String() string {
	if s.n == 0 {
		return "-"
	}
	r := func(d time.Duration) string {
		switch {
		case d >= 10*time.Millisecond:
			return d.Round(100 * time.Microsecond).String()
		case d >= time.Millisecond:
			return d.Round(10 * time.Microsecond).String()
		}
		return d.Round(time.Microsecond).String()
	}
	return r(s.min) + "/" + r(s.med) + "/" + r(s.p99)
}

func rssKiB(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
			return n
		}
	}
	return 0
}

// fill brings the idle pod to n containers (created, not started: they
// count for ListContainers as any other).
func (b *bench) fill(ctx context.Context, n int) error {
	if b.fillPod == "" {
		sb, cfg, err := b.pod(ctx, b.direct)
		if err != nil {
			return err
		}
		b.fillPod, b.fillCfg = sb, cfg
	}
	for ; b.filled < n; b.filled++ {
		id, err := b.container(ctx, b.direct, b.fillPod, b.fillCfg, fmt.Sprintf("idle%d", b.filled), &runtimeapi.NamespaceOption{})
		if err != nil {
			return err
		}
		b.one = id
	}
	return nil
}
