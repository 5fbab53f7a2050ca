package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// Config configures a run.
type Config struct {
	Duration time.Duration // of the workload under faults, after the warm-up
	Seed     int64
	Backend  string // its label in the report, e.g. "containerd-2.4 (nri)"
	Break    string // the broken build's tag, for the report

	Pods       int           // about 30
	DebugEvery time.Duration // about a second
	ChurnEvery time.Duration // a pod deleted and another made
	// RecoveryBound is how long the node and the pods may take to be back
	// after a fault (see recovered).
	RecoveryBound time.Duration
	SampleEvery   time.Duration // the shim's resources, after the warm-up
	Faults        Plan          // which faults, how often
	Growth        Growth

	ShimBinary, KubeBin, Etcd, Containerd, Runc string
	Kubelet                                     string // "" for KubeBin's: an older one, paired with the backend as nodes run them
	ShimFlags                                   []string
	Logs                                        string // where the components' logs are copied, "" for nowhere
	Out                                         io.Writer
}

// run is one soak run's state: the node, the workload, the oracle's
// observer, and the report being filled (under mu).
type run struct {
	cfg   Config
	node  *node
	work  *workload
	obs   *observer
	watch *watchdog
	start time.Time // the warm-up's end

	mu  sync.Mutex
	rep *Report
}

func (r *run) logf(format string, args ...any) {
	fmt.Fprintf(r.cfg.Out, "%s +%-6s "+format+"\n", append([]any{time.Now().UTC().Format("15:04:05"), time.Since(r.start).Round(time.Second)}, args...)...)
}

// Run runs the soak and returns its report; an error only when the run
// could not be made (the node did not start). The report's Failures say
// whether the node held.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if cfg.Out == nil {
		cfg.Out = os.Stdout
	}
	schedule := Schedule(cfg.Seed, cfg.Duration, quietTail, cfg.Faults)
	fmt.Fprintf(cfg.Out, "soak: seed %d, %s on %s, %d pods, a debug container every ~%s, a pod replaced every ~%s, recovery bound %s\nfaults (after the warm-up):\n%s",
		cfg.Seed, cfg.Duration, cfg.Backend, cfg.Pods, cfg.DebugEvery, cfg.ChurnEvery, cfg.RecoveryBound, FormatSchedule(schedule))
	r := &run{cfg: cfg, watch: &watchdog{}, start: time.Now(), rep: &Report{
		Duration: cfg.Duration, Seed: cfg.Seed, Backend: cfg.Backend, Break: cfg.Break, Recovery: cfg.RecoveryBound, Growth: cfg.Growth,
		Outcomes: map[Outcome]int{}, Reasons: map[string]int{}, Faults: map[FaultKind]int{},
	}}
	sctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	n, err := startNode(sctx, cfg)
	cancel()
	if err != nil {
		return nil, err
	}
	r.node = n
	r.obs = &observer{direct: n.direct, watch: r.watch, kubeletLog: n.kube.KubeletLog(), printed: map[string]string{}}
	r.work = newWorkload(n.api, n.image, cfg.Seed, r.logf)
	r.logf("node up: %s, the shim and a kubelet (%s)", cfg.Backend, n.kubelet)

	r.soak(ctx, schedule)

	if len(r.rep.Hangs) > 0 {
		// a hung containerd (the plugin-sync deadlock stays until it
		// restarts) would hang the teardown's removals too
		r.logf("calls hung: containerd restarted before the teardown")
		if err := n.backend.Containerd.Restart(context.WithoutCancel(ctx)); err != nil {
			r.rep.Teardown = append(r.rep.Teardown, fmt.Sprintf("restart containerd: %v", err))
		}
	}
	if err := n.stop(cfg); err != nil {
		r.rep.Teardown = append(r.rep.Teardown, strings.Split(err.Error(), "\n")...)
	}
	return r.rep, nil
}

// quietTail: no fault in the run's last half minute, so that the last one
// has recovered before the end.
const quietTail = 30 * time.Second

func (r *run) soak(ctx context.Context, schedule []Fault) {
	for i := range r.cfg.Pods {
		r.work.makePod(ctx, podKind(i%3))
	}
	r.warmUp(ctx)
	r.start = time.Now()
	r.logf("warm-up done: the soak starts")

	wctx, stopWork := context.WithTimeout(ctx, r.cfg.Duration)
	defer stopWork()
	octx, stopObserving := context.WithCancel(ctx)
	var wg, obsWG sync.WaitGroup
	obsWG.Add(1)
	go func() { defer obsWG.Done(); r.observe(octx) }()
	wg.Add(4)
	go func() { defer wg.Done(); r.work.every(wctx, r.cfg.ChurnEvery, r.work.replace) }()
	go func() { defer wg.Done(); r.work.every(wctx, r.cfg.DebugEvery, r.work.debugRandom) }()
	go func() { defer wg.Done(); r.sampleEvery(wctx) }()
	go func() { defer wg.Done(); r.faults(wctx, ctx, schedule) }()
	wg.Wait()
	r.logf("workload stopped; judging the debug containers still pending")
	r.drain(ctx)
	stopObserving()
	obsWG.Wait()
	if s, err := r.node.sample(time.Since(r.start)); err == nil {
		r.rep.Samples = append(r.rep.Samples, s)
	}
	r.rep.Grew = r.cfg.Growth.Check(r.rep.Samples)
	r.checkLeaks(ctx)
	r.rep.Hangs = append(r.rep.Hangs, r.watch.hung()...)
	r.rep.Hangs = append(r.rep.Hangs, kubeletHangs(r.node.kube.KubeletLog())...)
	r.work.mu.Lock()
	r.rep.PodsMade, r.rep.DebugMade, r.rep.APIErrors = r.work.made, r.work.asked, r.work.errs
	r.work.mu.Unlock()
}

// warmUp waits until nine in ten of the pods have their runners ready (at
// most five minutes), then a quarter of a minute more.
func (r *run) warmUp(ctx context.Context) {
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		pods, err := r.node.api.listPods(cctx)
		cancel()
		ready := 0
		for i := range pods {
			if runnersReady(&pods[i]) {
				ready++
			}
		}
		if err == nil && ready*10 >= r.cfg.Pods*9 {
			r.logf("warm-up: %d of %d pods running", ready, len(pods))
			break
		}
		time.Sleep(2 * time.Second)
	}
	select {
	case <-ctx.Done():
	case <-time.After(15 * time.Second):
	}
}

// observe reads what the containers printed and judges the debug
// containers, every second, until ctx ends.
func (r *run) observe(ctx context.Context) {
	for ctx.Err() == nil {
		r.observeOnce(ctx)
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (r *run) observeOnce(ctx context.Context) {
	r.obs.collect(ctx)
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	pods, err := r.node.api.listPods(cctx)
	cancel()
	if err != nil {
		return
	}
	byName := map[string]int{}
	for i := range pods {
		byName[pods[i].Name] = i
	}
	r.work.mu.Lock()
	pending := make([]*debugReq, 0, len(r.work.pending))
	for _, d := range r.work.pending {
		pending = append(pending, d)
	}
	r.work.mu.Unlock()
	for _, d := range pending {
		var p *corev1.Pod
		if i, ok := byName[d.pod]; ok {
			p = &pods[i]
		}
		v := r.obs.judge(ctx, d, p)
		if v == nil {
			continue
		}
		r.work.mu.Lock()
		delete(r.work.pending, d.pod+"/"+d.name)
		r.work.mu.Unlock()
		r.record(v)
	}
}

func (r *run) record(v *verdict) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if v.lost {
		r.rep.Lost++
		return
	}
	r.rep.Outcomes[v.outcome]++
	d := v.req
	switch v.outcome {
	case FellBack, Refused:
		r.rep.Reasons[string(v.outcome)+" "+v.why]++
	case DiedWithTarget:
		r.logf("died with its target: %s/%s --target=%s: %s", d.pod, d.name, d.target, v.why)
	case Unseen:
		r.logf("joined, not seen by the shim: %s/%s --target=%s: %s", d.pod, d.name, d.target, v.why)
	case WrongJoin:
		r.rep.WrongJoins = append(r.rep.WrongJoins, fmt.Sprintf("%s/%s --target=%s (target killed: %v): %s", d.pod, d.name, d.target, d.killed, v.why))
		r.logf("WRONG: %s/%s --target=%s: %s", d.pod, d.name, d.target, v.why)
	}
}

// drain judges what is still pending, for as long as a debug container may
// take (stuckAfter).
func (r *run) drain(ctx context.Context) {
	deadline := time.Now().Add(stuckAfter + 10*time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		r.work.mu.Lock()
		n := len(r.work.pending)
		r.work.mu.Unlock()
		if n == 0 {
			return
		}
		time.Sleep(time.Second)
	}
}

// sampleEvery samples the shim every SampleEvery, from the start.
func (r *run) sampleEvery(ctx context.Context) {
	for {
		if s, err := r.node.sample(time.Since(r.start)); err == nil {
			r.mu.Lock()
			r.rep.Samples = append(r.rep.Samples, s)
			r.mu.Unlock()
			r.logf("shim pid %d: RSS %s, fds %d, goroutines %d", s.PID, mib(s.RSS), s.FDs, s.Goroutines)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.cfg.SampleEvery):
		}
	}
}

// faults injects the schedule's faults, each at its time, until ctx ends,
// and waits for the node to recover from each before the next, until
// outer ends (the recovery from the last fault may outlast ctx).
func (r *run) faults(ctx, outer context.Context, schedule []Fault) {
	for _, f := range schedule {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(r.start.Add(f.At))):
		}
		if ctx.Err() != nil {
			return // the run ended while the last recovery was awaited
		}
		r.logf("fault: %s", f.Kind)
		began := time.Now()
		// a fault, once begun, is carried out whole: a containerd
		// restart cut short would leave no containerd
		err := r.inject(context.WithoutCancel(ctx), f.Kind)
		r.mu.Lock()
		r.rep.Faults[f.Kind]++
		if err != nil {
			r.rep.FaultErrors = append(r.rep.FaultErrors, fmt.Sprintf("%s at +%s: %v", f.Kind, f.At, err))
		}
		r.mu.Unlock()
		if err != nil {
			r.logf("fault %s: %v", f.Kind, err)
		}
		end := time.Now()
		var why string
		for {
			ok, w := r.recovered(outer, end)
			if ok || outer.Err() != nil {
				break
			}
			why = w
			if time.Since(began) > r.cfg.RecoveryBound {
				break
			}
			time.Sleep(time.Second)
		}
		took := time.Since(began)
		r.mu.Lock()
		if took > r.cfg.RecoveryBound {
			r.rep.Unrecovered = append(r.rep.Unrecovered, fmt.Sprintf("%s at +%s: not back within %s: %s", f.Kind, f.At, r.cfg.RecoveryBound, why))
		}
		if took > r.rep.Longest {
			r.rep.Longest, r.rep.LongestOf = took, f.Kind
		}
		r.mu.Unlock()
		r.logf("recovered from %s in %s", f.Kind, took.Round(100*time.Millisecond))
	}
}

// checkLeaks waits for the kubelet to collect what deleted pods left (its
// garbage collection runs every minute; up to two), then lists what is
// still there.
func (r *run) checkLeaks(ctx context.Context) {
	var left, before []string
	var err error
	same := 0
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(5 * time.Second) {
		left, err = r.leaks(ctx)
		if err == nil && len(left) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		// what the kubelet collects is gone, and the rest has not changed
		// for 20 s: nothing else will remove it
		if same++; !slices.Equal(left, before) || slices.ContainsFunc(left, collectable) {
			same = 0
		}
		if same == 4 {
			break
		}
		before = left
	}
	if err != nil {
		left = append(left, fmt.Sprintf("could not list: %v", err))
	}
	r.rep.Leaks = left
	r.logf("leak check: %d left", len(left))
}

// collectable: a leak the kubelet's garbage collection may still remove.
func collectable(leak string) bool {
	return strings.HasPrefix(leak, "sandbox ") || strings.HasPrefix(leak, "container ")
}

// kubeletHangs are the kubelet's CRI calls that reached their deadline, from
// its log.
func kubeletHangs(log string) []string {
	b, err := os.ReadFile(log)
	if err != nil {
		return []string{fmt.Sprintf("read the kubelet's log: %v", errors.Unwrap(err))}
	}
	var hangs []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "code = DeadlineExceeded") {
			hangs = append(hangs, "kubelet: "+l)
		}
	}
	return hangs
}
