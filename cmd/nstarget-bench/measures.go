package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// bench runs the measures one after the other. Owned by the goroutine that
// calls all; the throughput measure's clients only read sides.
type bench struct {
	o     options
	sides [nSides]side
	// n is how many sides are measured: nSides with a baseline, one fewer
	// without (the baseline is the last side)
	n       int
	results []result
	figures map[string]outcome // the shim's headline figures
	// baseline is the baseline's headline figures, computed as the shim's;
	// nil without a baseline
	baseline map[string]outcome
	pods     int
	// a pod on the direct side holding idle containers, for the read-only
	// measures; one is the container asked about
	fillPod string
	fillCfg *runtimeapi.PodSandboxConfig
	filled  int
	one     string
	// update is a second shim in front of the same containerd, forced onto
	// the Update path, when the first targets through NRI; nil otherwise.
	update *side
}

func (b *bench) all(ctx context.Context) error {
	b.figures = map[string]outcome{}
	if b.n > sideBaseline {
		b.baseline = map[string]outcome{}
	}
	fmt.Printf("rounds: %d lifecycles and TARGET creates per side, %d unary calls per side, %d clients x %v per side\n\n",
		b.o.count, b.o.calls, b.o.clients, b.o.duration)
	defer func() {
		if b.fillPod != "" {
			b.removePod(b.sides[sideDirect], b.fillPod)
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
	return nil
}

// shims are the cri-nstarget sides: the shim, and the baseline if there is one.
func (b *bench) shims() []int {
	if b.n > sideBaseline {
		return []int{sideShim, sideBaseline}
	}
	return []int{sideShim}
}

// each is what f says of every cri-nstarget side, in a few words each.
func (b *bench) each(f func(k int) string) string {
	var parts []string
	for _, k := range b.shims() {
		parts = append(parts, f(k))
	}
	return strings.Join(parts, "; ")
}

// figure records the headline figure name as of computes it for the shim
// and, if there is one, the baseline.
func (b *bench) figure(name string, of func(k int) outcome) {
	b.figures[name] = of(sideShim)
	if b.baseline != nil {
		b.baseline[name] = of(sideBaseline)
	}
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

// lifecycle: the seven calls of a pod's life, wall time, direct and the
// shims in turn.
func (b *bench) lifecycle(ctx context.Context) error {
	fmt.Println("• pod lifecycle ...")
	var ds [nSides][]time.Duration
	ks := append([]int{sideDirect}, b.shims()...)
	for i := 0; i < len(ks)*b.o.count; i++ {
		k := ks[order(len(ks), i)]
		c := b.sides[k]
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
		ds[k] = append(ds[k], time.Since(start))
	}
	st := summarizeAll(ds)
	ratio := func(k int) float64 { return float64(st[k].med) / float64(st[sideDirect].med) }
	b.results = append(b.results, result{measure: "pod lifecycle (7 calls)", sides: st,
		figure: b.each(func(k int) string { return fmt.Sprintf("%s/direct p50 %.3f", sideNames[k], ratio(k)) })})
	b.figure(figLifecycle, func(k int) outcome { return atMost("%.3f", ratio(k), 1.02) })
	return nil
}

// The kinds of create+start rounds of the target measure.
const (
	podViaShim        = iota // pid POD through the shim: no targeting
	targetViaShim            // pid TARGET through the shim
	targetDirect             // pid TARGET to containerd, which handles it itself (1.6: pid only)
	targetViaUpdate          // pid TARGET through the second shim, on the Update path (NRI backends)
	targetViaBaseline        // pid TARGET through the baseline
	podDirect                // pid POD to containerd: with podViaShim, the proxy's hop alone
	nKinds
)

// targetVia is the kind of a cri-nstarget side's pid TARGET rounds.
var targetVia = [nSides]int{sideShim: targetViaShim, sideBaseline: targetViaBaseline}

// target: CreateContainer+StartContainer with pid TARGET through the shim
// against containerd's own TARGET (the same target container, the same
// namespace joined), and against pid POD through the shim, interleaved.
func (b *bench) target(ctx context.Context) error {
	fmt.Println("• TARGET create+start ...")
	shim, direct := b.sides[sideShim], b.sides[sideDirect]
	sb, cfg, err := b.pod(ctx, shim)
	if err != nil {
		return err
	}
	defer b.removePod(shim, sb)
	app, err := b.container(ctx, shim, sb, cfg, "app", &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER})
	if err != nil {
		return err
	}
	if _, err := shim.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: app}); err != nil {
		return err
	}
	var ds, creates, starts [nKinds][]time.Duration
	// versions: one Version call a side in each round, right after the
	// round's start, in the round's warmth; gc the shim's collections and
	// CPU over the rounds
	var versions [nSides][]time.Duration
	gc := b.startGCSpan()
	kinds := []int{podViaShim, targetViaShim, targetDirect, podDirect}
	if b.update != nil {
		kinds = append(kinds, targetViaUpdate)
	}
	if b.baseline != nil {
		kinds = append(kinds, targetViaBaseline)
	}
	for i := 0; i < len(kinds)*b.o.count; i++ {
		k, c := kinds[order(len(kinds), i)], shim
		ns := &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: app}
		switch k {
		case podViaShim:
			ns = &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_POD}
		case podDirect:
			c, ns = direct, &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_POD}
		case targetDirect:
			c = direct
		case targetViaUpdate:
			c = *b.update
		case targetViaBaseline:
			c = b.sides[sideBaseline]
		}
		start := time.Now()
		id, err := b.container(ctx, c, sb, cfg, fmt.Sprintf("c%d", i), ns)
		if err != nil {
			return err
		}
		created := time.Now()
		if _, err := c.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
			return fmt.Errorf("%s StartContainer: %w", c.name, err)
		}
		ds[k] = append(ds[k], time.Since(start))
		creates[k] = append(creates[k], created.Sub(start))
		starts[k] = append(starts[k], time.Since(created))
		for j := range b.n {
			sd := order(b.n, i*b.n+j) // every side once a round, in turn first
			t0 := time.Now()
			if _, err := b.sides[sd].rt.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
				return fmt.Errorf("%s Version: %w", b.sides[sd].name, err)
			}
			versions[sd] = append(versions[sd], time.Since(t0))
		}
		c.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0})
		c.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	}
	// containerd's own TARGET in the direct column, the shims' in theirs
	pair := func(d [nKinds][]time.Duration) [nSides]stats {
		return [nSides]stats{sideDirect: summarize(d[targetDirect]), sideShim: summarize(d[targetViaShim]),
			sideBaseline: summarize(d[targetViaBaseline])}
	}
	// create times here are bimodal (about 6 and 16 ms): the median of the
	// pairwise differences (Hodges-Lehmann) is given beside the difference
	// of the medians, which jumps with the mix
	diff := func(d [nKinds][]time.Duration, from, to int) string {
		return fmt.Sprintf("p50 %s (pairwise %s)", signed(summarize(d[to]).med-summarize(d[from]).med), signed(shift(d[from], d[to])))
	}
	vsDirect := func(d [nKinds][]time.Duration) string {
		return b.each(func(k int) string { return sideNames[k] + " " + diff(d, targetDirect, targetVia[k]) })
	}
	all := pair(ds)
	b.results = append(b.results,
		result{measure: "create+start, pid TARGET: containerd's own vs through the shim", sides: all, figure: vsDirect(ds)},
		result{measure: "  CreateContainer, pid TARGET", sides: pair(creates), figure: vsDirect(creates)},
		result{measure: "  StartContainer, pid TARGET", sides: pair(starts), figure: vsDirect(starts)},
		result{measure: "create+start, pid POD through the shim (no targeting)", sides: [nSides]stats{sideDirect: summarize(ds[podDirect]), sideShim: summarize(ds[podViaShim])},
			figure: "TARGET via shim " + diff(ds, podViaShim, targetViaShim)},
		// what a TARGET create adds splits into the proxy's hop (POD through
		// the shim against POD to containerd) and the targeting beyond it
		// (TARGET against POD, through the shim and in containerd's own)
		result{measure: "  CreateContainer, pid POD: the proxy's hop", sides: [nSides]stats{sideDirect: summarize(creates[podDirect]), sideShim: summarize(creates[podViaShim])},
			figure: "shim " + diff(creates, podDirect, podViaShim) + "; TARGET over POD: shim " + diff(creates, podViaShim, targetViaShim) +
				", containerd " + diff(creates, podDirect, targetDirect)},
	)
	gcShare := gc.end()
	if err := b.hop(ctx, versions, shift(creates[podDirect], creates[podViaShim]), gcShare); err != nil {
		return err
	}
	// what side k adds to containerd's own create+start, against limit
	vsOwn := func(k int, via string, limit time.Duration) outcome {
		extra := all[k].med - all[sideDirect].med
		return outcome{fmt.Sprintf("%s (%s%s %v, containerd %v)", signed(extra), sideNames[k], via, round(all[k].med), round(all[sideDirect].med)),
			judge(extra <= limit)}
	}
	b.figure(figTarget, func(k int) outcome { return vsOwn(k, "", 2*time.Millisecond) })
	if b.update == nil {
		return nil
	}
	upd := summarize(ds[targetViaUpdate])
	b.results = append(b.results,
		result{measure: "create+start, pid TARGET: containerd's own vs the shim on the Update path", sides: [nSides]stats{sideDirect: all[sideDirect], sideShim: upd},
			figure: "Update path " + diff(ds, targetDirect, targetViaUpdate) + "; NRI path vs Update path " + diff(ds, targetViaUpdate, targetViaShim)},
		result{measure: "  CreateContainer, pid TARGET, Update path", sides: [nSides]stats{sideDirect: summarize(creates[targetDirect]), sideShim: summarize(creates[targetViaUpdate])},
			figure: "Update path " + diff(creates, targetDirect, targetViaUpdate)})
	b.figure(figTargetNRI, func(k int) outcome { return vsOwn(k, " via NRI", time.Millisecond) })
	uextra := upd.med - all[sideDirect].med
	b.figures[figTargetUpdate] = outcome{fmt.Sprintf("%s (shim via Update %v, containerd %v)", signed(uextra), round(upd.med), round(all[sideDirect].med)), "reported"}
	return nil
}

// latency measures single calls on the sides in blocks of size calls,
// perSide calls a side, the blocks in turn by order.
func (b *bench) latency(name string, perSide, size int, call func(side) error) ([nSides]stats, error) {
	var ds [nSides][]time.Duration
	blocks := max(1, perSide/size)
	for blk := 0; blk < b.n*blocks; blk++ {
		k := order(b.n, blk)
		c := b.sides[k]
		for i := 0; i < size; i++ {
			start := time.Now()
			if err := call(c); err != nil {
				return [nSides]stats{}, fmt.Errorf("%s via %s: %w", name, c.name, err)
			}
			ds[k] = append(ds[k], time.Since(start))
		}
	}
	return summarizeAll(ds), nil
}

func summarizeAll(ds [nSides][]time.Duration) [nSides]stats {
	var st [nSides]stats
	for k := range ds {
		st[k] = summarize(ds[k])
	}
	return st
}

// added is what the shim, the baseline if measured, and the splice add to
// the direct p50 and p99.
func added(st [nSides]stats) string {
	d := st[sideDirect]
	var p50, p99 []string
	for _, k := range []int{sideShim, sideBaseline, sideSplice} {
		if st[k].n > 0 {
			p50 = append(p50, sideNames[k]+" "+signed(st[k].med-d.med))
			p99 = append(p99, sideNames[k]+" "+signed(st[k].p99-d.p99))
		}
	}
	return "added p50 " + strings.Join(p50, ", ") + "; p99 " + strings.Join(p99, ", ")
}

// unary: added latency of single calls, blocks of 50 calls going to direct,
// shim, splice and baseline in turn.
func (b *bench) unary(ctx context.Context) error {
	fmt.Printf("• unary latency (with %d containers present) ...\n", b.o.containers)
	if err := b.fill(ctx, b.o.containers); err != nil {
		return err
	}
	one := b.one
	calls := []struct {
		name     string
		p50, p99 string // headline figures, if any
		call     func(side) error
	}{
		{"Version", figVersionP50, figVersionP99, func(c side) error { _, err := c.rt.Version(ctx, &runtimeapi.VersionRequest{}); return err }},
		{"ContainerStatus", figStatusP50, figStatusP99, func(c side) error {
			_, err := c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: one})
			return err
		}},
		{fmt.Sprintf("ListContainers (%d containers)", b.o.containers), "", "", func(c side) error {
			_, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			return err
		}},
	}
	for _, call := range calls {
		for i := 0; i < 50; i++ { // warm up all sides
			for _, c := range b.sides[:b.n] {
				call.call(c)
			}
		}
		st, err := b.latency(call.name, b.o.calls, 50, call.call)
		if err != nil {
			return err
		}
		b.results = append(b.results, result{measure: call.name, sides: st, figure: added(st)})
		d, f := st[sideDirect], st[sideSplice]
		if call.p50 != "" {
			b.figure(call.p50, func(k int) outcome { return vsFloor(st[k].med-d.med, f.med-d.med, 2) })
			b.figure(call.p99, func(k int) outcome { return vsFloor(st[k].p99-d.p99, f.p99-d.p99, 4) })
		}
	}
	return nil
}

// throughput: clients issuing ListContainers and ContainerStatus for the
// duration on each side, in one-second slices going to direct, shim, splice
// and baseline in turn; the peak RSS and CPU time of all but direct.
func (b *bench) throughput(ctx context.Context) error {
	fmt.Printf("• %d-client throughput (with %d containers present) ...\n", b.o.clients, b.o.containers)
	if err := b.fill(ctx, b.o.containers); err != nil { // a no-op after unary
		return err
	}
	one := b.one
	var ops, fails, ticks [nSides]int64
	var firstErr [nSides]error
	var elapsed [nSides]time.Duration
	var cpuErr error // the first failure to read a CPU time
	readCPU := func(pid int) int64 {
		t, err := cpuTicks(pid)
		if err != nil && cpuErr == nil {
			cpuErr = err
		}
		return t
	}
	var peakRSS [nSides]atomic.Int64
	stopRSS := make(chan struct{})
	defer close(stopRSS)
	go func() {
		for {
			select {
			case <-stopRSS:
				return
			case <-time.After(100 * time.Millisecond):
				for k, c := range b.sides {
					if kib := rssKiB(c.pid); kib > peakRSS[k].Load() {
						peakRSS[k].Store(kib)
					}
				}
			}
		}
	}()
	// Short slices (one second, at least 8 a side), so that the VM's
	// drifting speed falls on all sides alike.
	perSide := max(8, int(b.o.duration/time.Second))
	slice := b.o.duration / time.Duration(perSide)
	for round := 0; round < b.n*perSide; round++ {
		k := order(b.n, round)
		c := b.sides[k]
		var n, failed atomic.Int64
		var errOnce sync.Once
		var cpu0 int64
		if c.pid > 0 {
			cpu0 = readCPU(c.pid)
		}
		deadline := time.Now().Add(slice)
		start := time.Now()
		var wg sync.WaitGroup
		for i := 0; i < b.o.clients; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; time.Now().Before(deadline); j++ {
					var err error
					if j%2 == 0 {
						_, err = c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
					} else {
						_, err = c.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: one})
					}
					if err == nil {
						n.Add(1)
					} else {
						failed.Add(1)
						errOnce.Do(func() { firstErr[k] = err })
					}
				}
			}()
		}
		wg.Wait()
		if c.pid > 0 {
			ticks[k] += readCPU(c.pid) - cpu0
		}
		ops[k] += n.Load()
		fails[k] += failed.Load()
		elapsed[k] += time.Since(start)
		if b.o.verbose {
			fmt.Printf("  slice %d %s: %.0f calls/s, %d failed\n", round, c.name, float64(n.Load())/time.Since(start).Seconds(), failed.Load())
		}
	}
	for k, c := range b.sides {
		if fails[k] > 0 {
			return fmt.Errorf("throughput: %d calls failed via %s, first: %v", fails[k], c.name, firstErr[k])
		}
	}
	if cpuErr != nil {
		return fmt.Errorf("throughput: CPU time: %w", cpuErr)
	}
	var rate [nSides]float64
	for k := range rate {
		rate[k] = float64(ops[k]) / elapsed[k].Seconds()
	}
	d := rate[sideDirect]
	name := fmt.Sprintf("%d clients, ListContainers/ContainerStatus", b.o.clients)
	mib := func(k int) float64 { return float64(peakRSS[k].Load()) / 1024 }
	cpu := func(k int) time.Duration { return cpuPer1000(ticks[k], ops[k]) }
	var calls, rss, cpus []string
	for _, k := range append(b.shims(), sideSplice) {
		calls = append(calls, fmt.Sprintf("%s %.0f (%.3f)", sideNames[k], rate[k], rate[k]/d))
		rss = append(rss, fmt.Sprintf("%s %.1f MiB", sideNames[k], mib(k)))
		cpus = append(cpus, fmt.Sprintf("%s %v", sideNames[k], round(cpu(k))))
	}
	fig := fmt.Sprintf("calls/s: direct %.0f, %s", d, strings.Join(calls, ", "))
	if b.sides[sideShim].pid > 0 {
		fig += "; peak RSS " + strings.Join(rss, ", ") + "; CPU per 1,000 calls " + strings.Join(cpus, ", ")
	}
	b.results = append(b.results, result{measure: name, figure: fig})
	if b.o.clients != clientsHeadline {
		return nil // the summary's figures are for 64 clients
	}
	b.figure(figThroughput, func(k int) outcome {
		tp := atLeast("%.3f", rate[k]/d, 0.90)
		tp.measured += fmt.Sprintf(" (%.0f vs %.0f calls/s; splice %.3f)", rate[k], d, rate[sideSplice]/d)
		return tp
	})
	if b.sides[sideShim].pid > 0 {
		b.figure(figRSS, func(k int) outcome {
			rss := atMost("%.1f MiB", mib(k), 25)
			rss.measured += fmt.Sprintf(" (splice %.1f MiB)", mib(sideSplice))
			return rss
		})
		b.figure(figCPU, func(k int) outcome {
			return outcome{fmt.Sprintf("%v (%v a call over %d calls; splice %v)", round(cpu(k)), round(cpu(k)/1000),
				ops[k], round(cpu(sideSplice))), reported}
		})
	}
	return nil
}

// scaling: ListContainers added latency at several container counts,
// blocks of 25 calls going to each side in turn.
func (b *bench) scaling(ctx context.Context, points []int) error {
	fmt.Println("• ListContainers scaling ...")
	for _, n := range points {
		if n < b.filled {
			continue
		}
		if err := b.fill(ctx, n); err != nil {
			return err
		}
		st, err := b.latency("ListContainers", b.o.calls, 25, func(c side) error {
			_, err := c.rt.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
			return err
		})
		if err != nil {
			return err
		}
		b.results = append(b.results, result{measure: fmt.Sprintf("ListContainers at %d containers", b.filled), sides: st, figure: added(st)})
		if b.filled == listAtHeadline {
			d := st[sideDirect].med
			b.figure(figList300, func(k int) outcome { return vsFloor(st[k].med-d, st[sideSplice].med-d, 2) })
		}
	}
	return nil
}

// fill brings the idle pod to n containers (created, not started: they
// count for ListContainers as any other).
func (b *bench) fill(ctx context.Context, n int) error {
	direct := b.sides[sideDirect]
	if b.fillPod == "" {
		sb, cfg, err := b.pod(ctx, direct)
		if err != nil {
			return err
		}
		b.fillPod, b.fillCfg = sb, cfg
	}
	for ; b.filled < n; b.filled++ {
		id, err := b.container(ctx, direct, b.fillPod, b.fillCfg, fmt.Sprintf("idle%d", b.filled), &runtimeapi.NamespaceOption{})
		if err != nil {
			return err
		}
		b.one = id
	}
	return nil
}
