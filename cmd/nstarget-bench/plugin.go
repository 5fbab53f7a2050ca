package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// The plugin mode's measure (`nstarget-bench plugin`, make bench-plugin):
// what cri-nstarget --mode plugin adds to a TARGET create, and its memory
// (issue 49: a TARGET create at most containerd's own + 0.5 ms, pairwise;
// RSS at most 32 MiB). A plugin attached to a containerd sees every create
// of it, so "with" and "without" are two private containerds of the same
// binary and configuration, each with a pod and a running target, the
// plugin attached to the first. A pid TARGET container is created, started,
// stopped and removed on each in turn, one of each a round, which goes
// first alternating. First a control phase with the plugin attached to
// neither (what the two containerds differ by alone), then two with a
// do-nothing NRI plugin attached to the first (plugin_floor.go: NRI's own
// cost, the floor; and with PostCreateContainer too, a reference: the
// plugin subscribes to it no more), then the same with
// cri-nstarget's plugin attached. The figures: the first's time minus the second's,
// pairwise (all pairs, as bench-target's: the median is its "pairwise"),
// median and p90, per phase; the plugin's VmRSS and VmHWM after the creates.

type pluginOptions struct {
	shimBin string
	count   int // rounds with the plugin
	control int // rounds without it
}

// pluginSide is one containerd of the measure, its pod and target.
type pluginSide struct {
	name string
	env  *harness.Env
	conn io.Closer
	rt   runtimeapi.RuntimeServiceClient
	sb   string
	cfg  *runtimeapi.PodSandboxConfig
	app  string
}

// phase is what one phase's rounds took, by side: CreateContainer and
// StartContainer of the pid TARGET containers.
type phase struct {
	creates, starts [2][]time.Duration
}

func pluginCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("plugin", flag.ExitOnError)
	var o pluginOptions
	fs.StringVar(&o.shimBin, "shim-binary", "bin/cri-nstarget", "cri-nstarget binary, started with --mode plugin")
	fs.IntVar(&o.count, "count", 200, "TARGET creates per containerd with the plugin attached to one")
	fs.IntVar(&o.control, "control", 100, "TARGET creates per containerd before, with the plugin attached to neither")
	fs.Parse(args)
	if os.Geteuid() != 0 {
		return errors.New("needs root (containerd, runc, a tmpfs)")
	}
	started, m := time.Now(), machineFacts()
	bin, _ := filepath.Abs(o.shimBin)
	version, err := shimVersion(bin)
	if err != nil {
		return err
	}
	m.shim = version
	dir, undo, err := stateTmpfs()
	if err != nil {
		return err
	}
	defer undo()
	m.stateDir = "tmpfs (as /run on a node)"
	var sides [2]*pluginSide
	for i, name := range []string{"with the plugin", "containerd's own"} {
		s, err := startPluginSide(ctx, name, i)
		if err != nil {
			return err
		}
		defer s.close()
		sides[i] = s
	}
	if v, err := sides[0].rt.Version(ctx, &runtimeapi.VersionRequest{}); err == nil {
		m.containerd = fmt.Sprintf("%s %s (two private, same binary and configuration)", v.GetRuntimeName(), v.GetRuntimeVersion())
	}
	fmt.Printf("%d rounds without the plugin, %d with a do-nothing NRI plugin attached to the first containerd (CreateContainer), %d with one "+
		"subscribed to PostCreateContainer too, then %d with cri-nstarget's plugin attached to the first containerd\n", o.control, o.control, o.control, o.count)
	control, err := pluginRounds(ctx, sides, o.control, nil)
	if err != nil {
		return err
	}
	floor, err := floorRounds(ctx, sides, o.control, false)
	if err != nil {
		return err
	}
	floorPost, err := floorRounds(ctx, sides, o.control, true)
	if err != nil {
		return err
	}
	p, err := harness.StartPlugin(ctx, bin, filepath.Join(dir, "plugin"), sides[0].env.Containerd, "--log-level", "info")
	if err != nil {
		return err
	}
	defer p.Close()
	rss0, _ := memKiB(p.PID())
	with, err := pluginRounds(ctx, sides, o.count, pinnedByPlugin)
	if err != nil {
		return err
	}
	rss, hwm := memKiB(p.PID())
	fmt.Printf("\n%s\n", pluginReport([]namedPhase{{"control: no plugin", control},
		{"the floor: a do-nothing NRI plugin (CreateContainer) on the first", floor},
		{"a do-nothing NRI plugin (CreateContainer, PostCreateContainer) on the first", floorPost},
		{"the plugin attached to the first", with}}))
	fmt.Printf("the plugin (pid %d): VmRSS %.1f MiB after %d TARGET creates (%.1f MiB once synchronized), VmHWM %.1f MiB\n",
		p.PID(), mib(rss), o.count, mib(rss0), mib(hwm))
	fmt.Printf("\n%s: %s; %d CPUs, %s, %s, kernel %s; %s; state on %s; in %v\n", commandLine(append([]string{"plugin"}, args...)), m.containerd,
		m.cpus, m.cpuModel, m.os, m.kernel, m.shim, m.stateDir, time.Since(started).Round(time.Second))
	return nil
}

// stateTmpfs mounts a tmpfs on a new directory for the plugin's state, as
// /run is on a node; undo unmounts and removes it.
func stateTmpfs() (dir string, undo func(), err error) {
	if dir, err = os.MkdirTemp("/tmp", "nsb-plugin-"); err != nil {
		return "", nil, err
	}
	if err := unix.Mount("nstarget-bench", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0711,size=64m"); err != nil {
		os.Remove(dir)
		return "", nil, fmt.Errorf("tmpfs for the plugin's state: %w", err)
	}
	return dir, func() { unix.Unmount(dir, unix.MNT_DETACH); os.RemoveAll(dir) }, nil
}

// startPluginSide starts a private containerd with a pod (host network)
// and a running target container in it.
func startPluginSide(ctx context.Context, name string, i int) (_ *pluginSide, retErr error) {
	env, err := harness.Start(ctx, "")
	if err != nil {
		return nil, err
	}
	s := &pluginSide{name: name, env: env}
	defer func() {
		if retErr != nil {
			s.close()
		}
	}()
	if err := env.PullImages(ctx, env.Containerd.Endpoint()); err != nil {
		return nil, err
	}
	conn, err := dial(env.Containerd.Endpoint())
	if err != nil {
		return nil, err
	}
	s.conn, s.rt = conn, runtimeapi.NewRuntimeServiceClient(conn)
	b := &bench{o: options{image: env.BusyboxImage}, pods: i}
	c := side{name: name, rt: s.rt}
	if s.sb, s.cfg, err = b.pod(ctx, c); err != nil {
		return nil, err
	}
	if s.app, err = b.container(ctx, c, s.sb, s.cfg, "app", &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}); err != nil {
		return nil, err
	}
	if _, err := s.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: s.app}); err != nil {
		return nil, fmt.Errorf("%s StartContainer: %w", name, err)
	}
	return s, nil
}

// close removes the side's pod and stops its containerd.
func (s *pluginSide) close() {
	if s.sb != "" {
		(&bench{}).removePod(side{rt: s.rt}, s.sb)
	}
	if s.conn != nil {
		s.conn.Close()
	}
	s.env.Close()
}

// pluginRounds creates, starts, stops and removes n pid TARGET containers
// on each side, one of each a round, the first side first in even rounds;
// check, if not nil, is asked about the first side's first container.
func pluginRounds(ctx context.Context, sides [2]*pluginSide, n int, check func(context.Context, *pluginSide, string) error) (phase, error) {
	var ph phase
	for i := range 2 * n {
		k := (i + i/2) % 2 // 0 1, 1 0, 0 1, ...
		s := sides[k]
		b := &bench{o: options{image: s.env.BusyboxImage}}
		ns := &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: s.app}
		t0 := time.Now()
		id, err := b.container(ctx, side{name: s.name, rt: s.rt}, s.sb, s.cfg, fmt.Sprintf("c%d", i), ns)
		if err != nil {
			return ph, err
		}
		t1 := time.Now()
		if _, err := s.rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: id}); err != nil {
			return ph, fmt.Errorf("%s StartContainer: %w", s.name, err)
		}
		ph.creates[k] = append(ph.creates[k], t1.Sub(t0))
		ph.starts[k] = append(ph.starts[k], time.Since(t1))
		if check != nil && k == 0 && len(ph.creates[0]) == 1 {
			if err := check(ctx, s, id); err != nil {
				return ph, err
			}
		}
		s.rt.StopContainer(ctx, &runtimeapi.StopContainerRequest{ContainerId: id, Timeout: 0})
		s.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	}
	return ph, nil
}

// pinnedByPlugin fails unless container id's record says the plugin mode
// targeted it: the measure is of the plugin's work, not of a fallback.
func pinnedByPlugin(ctx context.Context, s *pluginSide, id string) error {
	resp, err := s.rt.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		return err
	}
	var info struct{ RuntimeSpec *specs.Spec }
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &info); err != nil || info.RuntimeSpec == nil {
		return fmt.Errorf("verbose info of %s: %v", id, err)
	}
	rec, ok, err := oci.ParseRecord(info.RuntimeSpec.Annotations)
	if err != nil || !ok || rec.Mode != "plugin" || rec.Namespaces["pid"].Result != oci.Targeted {
		return fmt.Errorf("the plugin did not target %s (record %+v, %v): nothing of the plugin's to measure", id, rec, err)
	}
	return nil
}

// namedPhase is a phase of the report and its name.
type namedPhase struct {
	name string
	p    phase
}

// pluginReport is the table of the phases: each side's times and the
// first's minus the second's over all pairs, median and p90.
func pluginReport(phases []namedPhase) string {
	var b strings.Builder
	b.WriteString("| phase | call, pid TARGET | first containerd: min / p50 / p99 | containerd's own: min / p50 / p99 | first − own, pairwise: p50 / p90 |\n|---|---|---|---|---|\n")
	for _, ph := range phases {
		for _, call := range []struct {
			name string
			ds   [2][]time.Duration
		}{{"CreateContainer", ph.p.creates}, {"StartContainer", ph.p.starts}} {
			p50, p90 := pairwise(call.ds[1], call.ds[0])
			fmt.Fprintf(&b, "| %s | %s | %v | %v | %s / %s |\n", ph.name, call.name, summarize(call.ds[0]), summarize(call.ds[1]), signed(p50), signed(p90))
		}
	}
	return b.String()
}

// pairwise is the median and the p90 of the differences b[j] - a[i] over
// all pairs (the median is shift's).
func pairwise(a, b []time.Duration) (p50, p90 time.Duration) {
	diffs := make([]time.Duration, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			diffs = append(diffs, y-x)
		}
	}
	if len(diffs) == 0 {
		return 0, 0
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i] < diffs[j] })
	at := func(q float64) time.Duration { return diffs[min(len(diffs)-1, int(q*float64(len(diffs))))] }
	return at(0.5), at(0.9)
}
