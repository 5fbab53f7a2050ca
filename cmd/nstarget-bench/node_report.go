package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"time"
)

// nodeReport is what `nstarget-bench node` prints at the end, pasted as is
// into docs/reports/benchmarks.md.
type nodeReport struct {
	command  string
	m        machine
	versions string
	o        nodeOptions
	when     time.Time
	took     time.Duration
	slices   []sliceResult
	rss, hwm int64 // the shim's VmRSS at the end and VmHWM over the measure, KiB
	hwmSetup int64 // its VmHWM before, the pods' creation included
	profile  string
}

// The goals of the node measure.
const (
	nodeCPUGoal = 0.10 // the shim's CPU time over containerd's
	nodeRSSGoal = 32   // MiB
	nodeP99Goal = 1.10 // the kubelet's p99 CRI latency through the shim over direct
)

// sideTotals is a side's slices added up.
type sideTotals struct {
	span   time.Duration
	cpu    [nProcs]time.Duration
	ops    scrape
	relist histogram
	gc     gcShare
}

func totals(results []sliceResult) ([nNodeSides]sideTotals, error) {
	var t [nNodeSides]sideTotals
	for k := range t {
		t[k].ops = scrape{}
	}
	for _, r := range results {
		s := &t[r.side]
		s.span += r.span
		for p := range r.cpu {
			s.cpu[p] += r.cpu[p]
		}
		for op, h := range r.ops {
			sum, err := s.ops[op].add(h)
			if err != nil {
				return t, fmt.Errorf("%s: %w", op, err)
			}
			s.ops[op] = sum
		}
		var err error
		if s.relist, err = s.relist.add(r.relist); err != nil {
			return t, fmt.Errorf("relist: %w", err)
		}
		s.gc.cycles += r.gc.cycles
		s.gc.pause += r.gc.pause
		s.gc.marking += r.gc.marking
		s.gc.cpu += r.gc.cpu
		s.gc.assist += r.gc.assist
	}
	return t, nil
}

// total is every operation's calls in one histogram (they share buckets).
func (s scrape) total() histogram {
	var t histogram
	for _, op := range slices.Sorted(maps.Keys(s)) {
		if sum, err := t.add(s[op]); err == nil {
			t = sum
		}
	}
	return t
}

// all is s.total(), for the progress lines.
func all(s scrape) histogram { return s.total() }

func mib(kib int64) float64 { return float64(kib) / 1024 }

// ratio is a/b with two decimals, "–" when b is not above zero.
func ratio(a, b float64) string {
	if b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

func (r nodeReport) String() (string, error) {
	t, err := totals(r.slices)
	if err != nil {
		return "", err
	}
	a, b := t[viaShim], t[viaDirect]
	var out strings.Builder
	fmt.Fprintf(&out, "Command: `%s` (%s, %s)\n\n", r.command, r.when.UTC().Format("2006-01-02 15:04 UTC"), r.took.Round(time.Second))
	fmt.Fprintf(&out, "- machine: %s\n", strings.TrimPrefix(strings.SplitN(r.m.String(), "\n", 2)[0], "- machine: "))
	fmt.Fprintf(&out, "- node: %s\n", r.versions)
	var order []string
	for _, s := range r.slices {
		order = append(order, fmt.Sprintf("%s %v", map[int]string{viaShim: "A", viaDirect: "B"}[s.side], s.span.Round(time.Second)))
	}
	fmt.Fprintf(&out, "- slices (A: the kubelet on the shim, B: on containerd directly): %s; a warm-up of %v after the pods were up and after each kubelet restart, left out\n\n",
		strings.Join(order, ", "), r.o.warmup)

	// the goals
	cpuRatio := float64(a.cpu[procShim]) / float64(a.cpu[procContainerd])
	pa, pb := a.ops.total(), b.ops.total()
	p99a, _, _ := pa.quantile(0.99)
	p99b, _, _ := pb.quantile(0.99)
	out.WriteString(header("figure", "goal", "measured", "met/missed"))
	out.WriteString(row("the shim's CPU time against containerd's (the daemon alone), the kubelet on the shim", "≤ 10%",
		fmt.Sprintf("%.1f%% (shim %v, containerd %v over %v)", 100*cpuRatio, round(a.cpu[procShim]), round(a.cpu[procContainerd]), a.span.Round(time.Second)),
		string(judge(cpuRatio <= nodeCPUGoal))))
	out.WriteString(row("the shim's peak RSS (VmHWM) over the measure", "≤ 32 MiB",
		fmt.Sprintf("%.1f MiB (VmRSS at the end %.1f MiB; VmHWM with the pods' creation %.1f MiB)", mib(r.hwm), mib(r.rss), mib(r.hwmSetup)),
		string(judge(mib(r.hwm) <= nodeRSSGoal))))
	out.WriteString(row("the kubelet's p99 CRI latency, every operation, through the shim / direct", "≤ 1.1×",
		fmt.Sprintf("%s (%s / %s; means %v / %v)", ratio(p99a, p99b), pa.quantileString(0.99), pb.quantileString(0.99), round(pa.mean()), round(pb.mean())),
		string(judge(!math.IsNaN(p99a) && p99b > 0 && p99a/p99b <= nodeP99Goal))))

	// CPU by process
	fmt.Fprintf(&out, "\nCPU time (utime + stime), each side's slices added up, and as a share of one core:\n\n")
	out.WriteString(header("process", "through the shim (A)", "direct (B)"))
	share := func(d, span time.Duration) string {
		return fmt.Sprintf("%v (%.2f%%)", round(d), 100*float64(d)/float64(span))
	}
	for p := range nProcs {
		out.WriteString(row(procNames[p], share(a.cpu[p], a.span), share(b.cpu[p], b.span)))
	}
	perCall := func(d time.Duration, h histogram) string {
		if h.count() == 0 {
			return "–"
		}
		return round(time.Duration(float64(d) / h.count())).String()
	}
	out.WriteString(row("cri-nstarget, per kubelet CRI call", perCall(a.cpu[procShim], pa), "–"))
	out.WriteString(row("containerd, per kubelet CRI call", perCall(a.cpu[procContainerd], pa), perCall(b.cpu[procContainerd], pb)))

	// the kubelet's CRI calls
	fmt.Fprintf(&out, "\nThe kubelet's CRI calls (%s: buckets 5 ms, 12.5 ms, 31 ms, ...; a quantile is interpolated within its bucket, shown in parentheses; the mean is exact):\n\n", runtimeOpsMetric)
	out.WriteString(header("operation", "calls/s A / B", "p50 A", "p50 B", "p99 A", "p99 B", "p99 A/B", "mean A / B", "mean A/B"))
	opRow := func(name string, ha, hb histogram) {
		qa, _, _ := ha.quantile(0.99)
		qb, _, _ := hb.quantile(0.99)
		out.WriteString(row(name,
			fmt.Sprintf("%.2f / %.2f", ha.count()/a.span.Seconds(), hb.count()/b.span.Seconds()),
			ha.quantileString(0.5), hb.quantileString(0.5), ha.quantileString(0.99), hb.quantileString(0.99), ratio(qa, qb),
			fmt.Sprintf("%v / %v", round(ha.mean()), round(hb.mean())), ratio(float64(ha.mean()), float64(hb.mean()))))
	}
	ops := map[string]bool{}
	for op := range a.ops {
		ops[op] = true
	}
	for op := range b.ops {
		ops[op] = true
	}
	for _, op := range slices.Sorted(maps.Keys(ops)) {
		if a.ops[op].count()+b.ops[op].count() > 0 {
			opRow(op, a.ops[op], b.ops[op])
		}
	}
	opRow("**every operation**", pa, pb)
	opRow("PLEG relist ("+relistMetric+")", a.relist, b.relist)

	// the collector, by slice
	fmt.Fprintf(&out, "\nThe shim's garbage collection over the A slices (gctrace): %s.\n", a.gc.of(a.cpu[procShim], a.span))

	fmt.Fprintf(&out, "\nBy slice:\n\n")
	out.WriteString(header("slice", "side", "span", "shim CPU", "containerd CPU", "kubelet CPU", "CRI calls", "p99", "mean", "shim VmRSS at the end", "container restarts so far"))
	for i, s := range r.slices {
		h := s.ops.total()
		out.WriteString(row(fmt.Sprint(i+1), nodeSideNames[s.side], s.span.Round(time.Second).String(), round(s.cpu[procShim]).String(),
			round(s.cpu[procContainerd]).String(), round(s.cpu[procKubelet]).String(), fmt.Sprintf("%.0f", h.count()),
			h.quantileString(0.99), round(h.mean()).String(), fmt.Sprintf("%.1f MiB", mib(s.shimRSS)), fmt.Sprint(s.restarts)))
	}
	if r.profile != "" {
		fmt.Fprintf(&out, "\nThe shim's CPU profile, %v with the kubelet on it after the measure (perf record -F 4999 -g; self time, entries of 1%% and more):\n\n```\n%s```\n", r.o.profile, r.profile)
	}
	return out.String(), nil
}
