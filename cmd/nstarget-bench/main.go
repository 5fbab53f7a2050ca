// Command nstarget-bench measures cri-nstarget against the containerd behind
// it, in the same run: every measure alternates direct and proxied rounds so
// that machine noise falls on all sides. Besides the shim, the latency and
// throughput measures take a third side, a byte splice in front of the same
// containerd (a process of its own that copies bytes and parses nothing):
// the floor of any proxy's cost on this machine. With --baseline-binary, a
// second shim from another binary (an older commit's) is one more side of
// every measure, so that old and new compare in one run. It ends with the figures of
// docs/reports/benchmarks.md, each against its target, as markdown, with the command
// line and the machine.
//
// By default it starts a private containerd and a shim (root needed); with
// --direct and --shim it measures running endpoints instead.
//
//	nstarget-bench [flags]           the CRI measures (make bench)
//	nstarget-bench critest [flags]   critest -benchmark directly and through the shim (make bench-critest)
//	nstarget-bench events [flags]    TARGET creates with events off, on, and to a silent apiserver (make bench-events)
//	nstarget-bench node [flags]      a kubelet with 100 pods on the shim and on containerd directly (make bench-node)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

type options struct {
	updateShim  string        // a second shim, on the Update path (private containerd with NRI)
	count       int           // rounds per latency measure (lifecycles, TARGET)
	calls       int           // calls per side for unary latency and each ListContainers point
	duration    time.Duration // per side, for throughput
	clients     int
	containers  int // containers present for ListContainers
	shimBin     string
	direct      string
	shim        string
	shimPID     int
	shimLog     string // its log, where the runtime's gctrace lines go; "": not known
	baselineBin string // another cri-nstarget binary, started beside the shim; "": none
	baseline    string // its endpoint, once started
	baselinePID int
	image       string
	sandboxSize []int // ListContainers scaling points
	only        string
	verbose     bool
	steps       bool     // the shims log each create's steps (debug), summarized at the end
	stepLogs    []string // their logs
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "splice" {
		spliceMain(os.Args[2:])
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if len(os.Args) > 1 && os.Args[1] == "events" {
		if err := eventsCmd(ctx, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "nstarget-bench events:", err)
			stop()
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "node" {
		if err := nodeCmd(ctx, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "nstarget-bench node:", err)
			stop()
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "plugin" {
		if err := pluginCmd(ctx, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "nstarget-bench plugin:", err)
			stop()
			os.Exit(1)
		}
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "critest" {
		if err := critestCmd(ctx, os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, "nstarget-bench critest:", err)
			stop()
			os.Exit(1)
		}
		return
	}
	var o options
	flag.IntVar(&o.count, "count", 20, "rounds per side for pod lifecycles and TARGET create+start")
	flag.IntVar(&o.calls, "calls", 2000, "calls per side for unary latency and for each ListContainers scaling point")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "time per side for the concurrent throughput measure")
	flag.IntVar(&o.clients, "clients", clientsHeadline, "concurrent clients for throughput")
	flag.IntVar(&o.containers, "containers", 200, "containers present for the unary and throughput measures")
	flag.StringVar(&o.shimBin, "shim-binary", "bin/cri-nstarget", "cri-nstarget binary to start (without --shim)")
	flag.StringVar(&o.direct, "direct", "", "containerd CRI endpoint to measure, a unix socket (with --shim; default: start one)")
	flag.StringVar(&o.shim, "shim", "", "cri-nstarget endpoint in front of --direct")
	flag.IntVar(&o.shimPID, "shim-pid", 0, "pid of the --shim process, for its memory and CPU time")
	flag.StringVar(&o.baselineBin, "baseline-binary", "", "another cri-nstarget binary (an older commit's) to measure beside --shim-binary, as one more side of every measure (without --direct); empty: none")
	flag.StringVar(&o.image, "image", "", "busybox-like image present on the backend (default: the private one's)")
	flag.StringVar(&o.only, "only", "", "comma-separated measures to run (lifecycle,target,scaling,unary,throughput); default all")
	flag.BoolVar(&o.verbose, "v", false, "print each slice of the throughput measure")
	flag.BoolVar(&o.steps, "steps", false, "run the shims at debug level and print where a TARGET create's time went, step by step (with -only target)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "nstarget-bench: unexpected arguments", flag.Args())
		os.Exit(2)
	}
	o.sandboxSize = []int{10, 100, listAtHeadline}
	if err := run(ctx, o, commandLine(os.Args[1:])); err != nil {
		fmt.Fprintln(os.Stderr, "nstarget-bench:", err)
		stop()
		os.Exit(1)
	}
}

func run(ctx context.Context, o options, command string) error {
	if o.direct != "" && o.baselineBin != "" {
		return fmt.Errorf("--baseline-binary starts the baseline in front of a private containerd: not with --direct")
	}
	started := time.Now()
	m := machineFacts()
	if o.direct == "" {
		if os.Geteuid() != 0 {
			return fmt.Errorf("needs root to start containerd (or give --direct and --shim)")
		}
		env, err := harness.Start(ctx, "")
		if err != nil {
			return err
		}
		defer env.Close()
		if err := env.PullImages(ctx, env.Containerd.Endpoint()); err != nil {
			return err
		}
		dir, err := os.MkdirTemp("/tmp", "nsb-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		// The shims' state dirs (pins, intent records) on a tmpfs, as the
		// unit's /run/cri-nstarget is on a node.
		if err := unix.Mount("nstarget-bench", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0711,size=64m"); err != nil {
			return fmt.Errorf("tmpfs for the shims' state: %w", err)
		}
		defer unix.Unmount(dir, unix.MNT_DETACH)
		m.stateDir = "tmpfs (as /run on a node)"
		var debug []string
		if o.steps {
			debug = []string{"--log-level", "debug"}
		}
		s, version, err := startShim(ctx, o.shimBin, dir, env.Containerd, debug...)
		if err != nil {
			return err
		}
		defer s.Close()
		o.stepLogs = append(o.stepLogs, s.LogPath())
		o.shimLog = s.LogPath()
		m.shim = version
		if _, err := os.Stat(env.Containerd.NRISocket()); err == nil {
			// containerd has NRI: the shim above targets through it, a
			// second one on the Update path is measured beside it
			u, _, err := startShim(ctx, o.shimBin, filepath.Join(dir, "update"), env.Containerd, append([]string{"--targeting-via", "update"}, debug...)...)
			if err != nil {
				return err
			}
			defer u.Close()
			o.stepLogs = append(o.stepLogs, u.LogPath())
			o.updateShim = u.Endpoint()
		}
		if o.baselineBin != "" {
			bs, version, err := startShim(ctx, o.baselineBin, filepath.Join(dir, "baseline"), env.Containerd)
			if err != nil {
				return fmt.Errorf("baseline: %w", err)
			}
			defer bs.Close()
			m.baseline, o.baseline, o.baselinePID = version, bs.Endpoint(), bs.PID()
			fmt.Printf("baseline cri-nstarget %s, pid %d\n", o.baselineBin, o.baselinePID)
		}
		o.direct, o.shim, o.shimPID, o.image = env.Containerd.Endpoint(), s.Endpoint(), s.PID(), env.BusyboxImage
		m.containerd = "private, " + o.direct
		fmt.Printf("containerd %s (private), cri-nstarget pid %d\n", o.direct, o.shimPID)
	} else {
		m.containerd, m.shim = o.direct, o.shim+" (running; version not known here)"
	}
	if o.shim == "" || o.image == "" {
		return fmt.Errorf("--shim and --image go with --direct")
	}
	dir, err := os.MkdirTemp("/tmp", "nsb-splice-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	spliceEP, splicePID, stopSplice, err := startSpliceProcess(dir, o.direct)
	if err != nil {
		return err
	}
	defer stopSplice()
	m.splice = fmt.Sprintf("`nstarget-bench splice`, io.Copy both ways, one containerd connection per client connection, a process of its own (pid %d)", splicePID)
	fmt.Printf("splice %s (pid %d)\n", spliceEP, splicePID)

	b := bench{o: o, n: nSides - 1}
	if o.baseline != "" {
		b.n = nSides
	}
	endpoints, pids := [nSides]string{o.direct, o.shim, spliceEP, o.baseline}, [nSides]int{0, o.shimPID, splicePID, o.baselinePID}
	for k := range b.n {
		c, err := dial(endpoints[k])
		if err != nil {
			return err
		}
		defer c.Close()
		b.sides[k] = side{name: sideNames[k], rt: runtimeapi.NewRuntimeServiceClient(c), pid: pids[k]}
	}
	if o.updateShim != "" {
		c, err := dial(o.updateShim)
		if err != nil {
			return err
		}
		defer c.Close()
		b.update = &side{name: "shim (Update path)", rt: runtimeapi.NewRuntimeServiceClient(c)}
	}
	if v, err := b.sides[sideDirect].rt.Version(ctx, &runtimeapi.VersionRequest{}); err == nil {
		m.containerd = fmt.Sprintf("%s %s (%s)", v.GetRuntimeName(), v.GetRuntimeVersion(), m.containerd)
	}
	if err := b.all(ctx); err != nil {
		return err
	}
	fmt.Printf("\n%s\n%s", detailTable(b.results, b.n), summary(command, m, started, time.Since(started), b.figures, b.baseline))
	if o.steps {
		fmt.Printf("\n%s", stepsTable(o.stepLogs...))
	}
	return nil
}

// startShim starts the cri-nstarget binary bin in front of c, with its
// socket, state dir and log in dir and extra flags, and says which binary
// it is (--version and sha256). The runtime logs each garbage collection
// to the shim's log (gctrace), for what the collector costs a measure.
func startShim(ctx context.Context, bin, dir string, c *harness.Containerd, extra ...string) (*harness.Shim, string, error) {
	bin, _ = filepath.Abs(bin)
	version, err := shimVersion(bin)
	if err != nil {
		return nil, "", err
	}
	wrapper, remove, err := gctraceWrapper(bin)
	if err != nil {
		return nil, "", err
	}
	defer remove() // exec'd by the time the shim serves
	s, err := harness.StartShim(ctx, wrapper, dir, c, append([]string{"--log-level", "warn"}, extra...)...)
	return s, version, err
}

func dial(endpoint string) (*grpc.ClientConn, error) {
	return harness.Dial(endpoint, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
}

// side is one endpoint under measure.
type side struct {
	name string
	rt   runtimeapi.RuntimeServiceClient
	pid  int // the process serving it, for its RSS and CPU time; 0: not measured
}

// machineFacts reads what the summary says about this machine; what
// cannot be read is left empty.
func machineFacts() machine {
	m := machine{cpus: runtime.NumCPU()}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.kernel = unix.ByteSliceToString(u.Release[:])
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.cpuModel = field(string(b), "model name", ":")
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		if f := strings.Fields(field(string(b), "MemTotal", ":")); len(f) > 0 {
			if kib, err := strconv.ParseInt(f[0], 10, 64); err == nil {
				m.memory = fmt.Sprintf("%.0f GiB", float64(kib)/(1<<20))
			}
		}
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		m.os = strings.Trim(field(string(b), "PRETTY_NAME", "="), `"`)
	}
	return m
}

// field is the value of the first line "key<sep>value" of text, trimmed.
func field(text, key, sep string) string {
	for _, line := range strings.Split(text, "\n") {
		k, v, ok := strings.Cut(line, sep)
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func signalNotify(c chan os.Signal) { signal.Notify(c, syscall.SIGINT, syscall.SIGTERM) }
