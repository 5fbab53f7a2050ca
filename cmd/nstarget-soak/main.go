// nstarget-soak runs a busy node under random faults (make soak; issue 36,
// internal/soak): the e2e cluster with the shim as the kubelet's runtime,
// about 30 pods made and deleted all the time, a debug container with
// --target about once a second, and the shim and containerd killed and
// restarted at seeded random times. It prints the seed, the schedule and a
// report, and exits 1 when the oracle, the recovery bound, the leak check
// or the growth bound fails.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cri-nstarget/cri-nstarget/internal/critest"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/internal/soak"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "nstarget-soak:", err)
		os.Exit(1)
	}
}

// breaks are the deliberately broken shim builds the soak must catch, by
// SOAK_BREAK name: their build tags (server/soakbreak.go,
// nriplugin/soakbreak.go).
var breaks = map[string]string{"intents": "soakbreak_intents", "nrigate": "soakbreak_nrigate"}

func run(ctx context.Context) error {
	cfg := soak.Config{Out: os.Stdout, Growth: soak.DefaultGrowth}
	seed := flag.String("seed", "", "the run's seed (default: random, printed)")
	brk := flag.String("break", "", "run a deliberately broken shim, built here: intents or nrigate")
	via := flag.String("targeting-via", "", "the shim's --targeting-via (default: its own choice, NRI where containerd has it)")
	flag.DurationVar(&cfg.Duration, "duration", 30*time.Minute, "how long the workload runs under faults, after the warm-up")
	flag.IntVar(&cfg.Pods, "pods", 30, "pods kept on the node")
	flag.DurationVar(&cfg.DebugEvery, "debug-every", time.Second, "mean interval between debug containers")
	flag.DurationVar(&cfg.ChurnEvery, "churn-every", 3*time.Second, "mean interval between pod replacements")
	flag.DurationVar(&cfg.RecoveryBound, "recovery-bound", 90*time.Second, "how long the node and pods may take to be back after a fault")
	flag.DurationVar(&cfg.SampleEvery, "sample-every", time.Minute, "how often the shim's RSS, fds and goroutines are sampled")
	faults := flag.String("faults", "", "only these faults, comma-separated (default: every kind)")
	flag.DurationVar(&cfg.Faults.Every, "fault-every", time.Minute, "about how often a fault comes")
	flag.StringVar(&cfg.ShimBinary, "shim-binary", "bin/cri-nstarget", "the shim (ignored with --break, which builds its own)")
	flag.StringVar(&cfg.KubeBin, "kubernetes-bin", "", "kube-apiserver, kubelet and kubectl (hack/kubernetes.sh)")
	flag.StringVar(&cfg.Kubelet, "kubelet", "", "the kubelet (default: --kubernetes-bin's): the one paired with the backend, as nodes run them")
	flag.StringVar(&cfg.Etcd, "etcd", "", "etcd (hack/etcd.sh)")
	flag.StringVar(&cfg.Containerd, "containerd", "containerd", "the containerd binary (hack/containerd.sh)")
	flag.StringVar(&cfg.Runc, "runc", "", "the runc binary (hack/runc.sh; default: containerd's PATH)")
	flag.StringVar(&cfg.Logs, "logs", "", "copy the components' logs here at the end")
	flag.Parse()
	if os.Geteuid() != 0 {
		return errors.New("a kubelet, containerd and runc need root")
	}
	if cfg.KubeBin == "" || cfg.Etcd == "" {
		return errors.New("--kubernetes-bin and --etcd are required (make soak sets them)")
	}
	kinds, err := soak.ParseKinds(*faults)
	if err != nil {
		return fmt.Errorf("--faults: %w", err)
	}
	cfg.Faults.Kinds = kinds
	cfg.Seed = rand.Int63()
	if *seed != "" {
		n, err := strconv.ParseInt(*seed, 10, 64)
		if err != nil {
			return fmt.Errorf("--seed: %w", err)
		}
		cfg.Seed = n
	}
	label, err := critest.BackendLabel(cfg.Containerd)
	if err != nil {
		return err
	}
	cfg.Backend = label
	if *via != "" {
		cfg.ShimFlags = append(cfg.ShimFlags, "--targeting-via", *via)
		cfg.Backend += " (" + *via + ")"
	}
	if *brk != "" {
		tag, ok := breaks[*brk]
		if !ok {
			return fmt.Errorf("--break %q: intents or nrigate", *brk)
		}
		root, err := filepath.Abs(".")
		if err != nil {
			return err
		}
		dir, err := os.MkdirTemp("", "nstarget-soak-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		if cfg.ShimBinary, err = harness.BuildShim(root, dir, tag); err != nil {
			return err
		}
		cfg.Break = tag
		fmt.Printf("soak: a BROKEN shim (%s), built into %s: the run must fail\n", tag, cfg.ShimBinary)
	}
	if cfg.ShimBinary, err = filepath.Abs(cfg.ShimBinary); err != nil {
		return err
	}
	rep, err := soak.Run(ctx, cfg)
	if err != nil {
		return err
	}
	rep.Print(os.Stdout)
	if f := rep.Failures(); len(f) > 0 {
		return fmt.Errorf("FAILED with seed %d: %s", cfg.Seed, strings.Join(f[:min(len(f), 3)], "; "))
	}
	return nil
}
