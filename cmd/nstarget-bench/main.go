// Command nstarget-bench measures cri-nstarget against the containerd behind
// it, in the same run: every measure alternates direct and proxied rounds so
// that machine noise falls on both sides. It prints min/median/p99 and the
// ratios against the targets of docs/benchmarks.md.
//
// By default it starts a private containerd and a shim (root needed); with
// --direct and --shim it measures running endpoints instead.
//
//	nstarget-bench [flags]           the CRI measures (make bench)
//	nstarget-bench critest [flags]   critest -benchmark directly and through the shim (make bench-critest)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

type options struct {
	count       int           // rounds per latency measure (lifecycles, TARGET)
	calls       int           // calls per side for unary latency
	duration    time.Duration // per side, for throughput
	clients     int
	containers  int // containers present for ListContainers
	shimBin     string
	direct      string
	shim        string
	shimPID     int
	image       string
	sandboxSize []int // ListContainers scaling points
	only        string
	verbose     bool
	floor       bool
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "splice" {
		spliceMain(os.Args[2:])
		return
	}
	if len(os.Args) > 1 && os.Args[1] == "critest" {
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		err := critestCmd(ctx, os.Args[2:])
		stop()
		if err != nil {
			fmt.Fprintln(os.Stderr, "nstarget-bench critest:", err)
			os.Exit(1)
		}
		return
	}
	var o options
	flag.IntVar(&o.count, "count", 20, "rounds per side for pod lifecycles and TARGET create+start")
	flag.IntVar(&o.calls, "calls", 2000, "calls per side for unary latency")
	flag.DurationVar(&o.duration, "duration", 5*time.Second, "time per side for the concurrent throughput measure")
	flag.IntVar(&o.clients, "clients", 64, "concurrent clients for throughput")
	flag.IntVar(&o.containers, "containers", 200, "containers present for ListContainers")
	flag.StringVar(&o.shimBin, "shim-binary", "bin/cri-nstarget", "cri-nstarget binary to start (without --shim)")
	flag.StringVar(&o.direct, "direct", "", "containerd CRI endpoint to measure (with --shim; default: start one)")
	flag.StringVar(&o.shim, "shim", "", "cri-nstarget endpoint in front of --direct")
	flag.IntVar(&o.shimPID, "shim-pid", 0, "pid of the --shim process, for its memory")
	flag.StringVar(&o.image, "image", "", "busybox-like image present on the backend (default: the private one's)")
	flag.StringVar(&o.only, "only", "", "comma-separated measures to run (lifecycle,target,scaling,unary,throughput); default all")
	flag.BoolVar(&o.verbose, "v", false, "print each slice of the throughput measure")
	flag.BoolVar(&o.floor, "floor", false, "measure a plain byte splice in front of containerd instead of the shim: the floor of any proxy's cost here (use with -only unary,throughput)")
	flag.Parse()
	if flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "nstarget-bench: unexpected arguments", flag.Args())
		os.Exit(2)
	}
	o.sandboxSize = []int{10, 100, 300}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "nstarget-bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
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
		bin, _ := filepath.Abs(o.shimBin)
		s, err := harness.StartShim(ctx, bin, dir, env.Containerd, "--log-level", "warn")
		if err != nil {
			return err
		}
		defer s.Close()
		o.direct, o.shim, o.shimPID, o.image = env.Containerd.Endpoint(), s.Endpoint(), s.PID(), env.BusyboxImage
		fmt.Printf("containerd %s (private), cri-nstarget pid %d\n", o.direct, o.shimPID)
	}
	if o.floor {
		dir, err := os.MkdirTemp("/tmp", "nsb-floor-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		ep, pid, stop, err := startSpliceProcess(dir, o.direct)
		if err != nil {
			return err
		}
		defer stop()
		o.shim, o.shimPID = ep, pid
		fmt.Printf("-floor: the \"shim\" side below is a byte splice (io.Copy, pid %d), not cri-nstarget\n", pid)
	}
	if o.shim == "" || o.image == "" {
		return fmt.Errorf("--shim and --image go with --direct")
	}
	d, err := dial(o.direct)
	if err != nil {
		return err
	}
	defer d.Close()
	p, err := dial(o.shim)
	if err != nil {
		return err
	}
	defer p.Close()
	b := &bench{o: o, direct: newSide("direct", d), shim: newSide("shim", p)}
	return b.all(ctx)
}

func dial(endpoint string) (*grpc.ClientConn, error) {
	return harness.Dial(endpoint, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
}

// side is one endpoint under measure.
type side struct {
	name string
	rt   runtimeapi.RuntimeServiceClient
}

func newSide(name string, c *grpc.ClientConn) side {
	return side{name: name, rt: runtimeapi.NewRuntimeServiceClient(c)}
}

func signalNotify(c chan os.Signal) { signal.Notify(c, syscall.SIGINT, syscall.SIGTERM) }
