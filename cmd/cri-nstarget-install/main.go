// Command cri-nstarget-install puts cri-nstarget on the node it runs on,
// from a privileged pod of the DaemonSet in deploy/ that sees the host's
// root at --host-root, and takes it off again (docs/cluster-install.md;
// the steps are package installer's):
//
//	cri-nstarget-install install    install, resume, upgrade or check; then wait
//	cri-nstarget-install cleanup    put the node back as it was; then wait
//	cri-nstarget-install version
//
// Either mode serves /readyz on --probe-address until SIGTERM, so that the
// pod stays Running: 200 once its node is settled, that is safe and decided
// (installed, refused, rolled back, upgrade-failed, removed: the kubelet on
// a runtime that serves), so that one node's outcome does not stop a
// DaemonSet's rollout; 503 while it is not (under way, failed, the
// apiserver out of reach), with the reason either way. The node's outcome
// is its label, annotation and Events. A node that failed, or whose install
// paused on an apiserver out of reach, is tried again every
// --retry-interval (a failed rollback resumes; a version rolled back is not
// tried again). Another error (systemd out of reach) ends the process with
// status 1: the kubelet starts it again, and it resumes from the state it
// left on the host.
//
// It is its own binary beside the shim's in the image: client-go and
// go-systemd's D-Bus client stay out of the shim.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/rest"

	"github.com/cri-nstarget/cri-nstarget/installer"
	"github.com/cri-nstarget/cri-nstarget/installer/cluster"
	"github.com/cri-nstarget/cri-nstarget/installer/cri"
	"github.com/cri-nstarget/cri-nstarget/installer/mounts"
	"github.com/cri-nstarget/cri-nstarget/installer/slots"
	"github.com/cri-nstarget/cri-nstarget/installer/systemd"
	"github.com/cri-nstarget/cri-nstarget/installer/trial"
)

// Build stamps, as the shim's (the Makefile's LDFLAGS).
var version, commit, date string

type options struct {
	mode            string
	root            string
	shim, unit      string
	binDir          string
	restarts        int
	leasePrefix     string
	leaseDuration   time.Duration
	healthTimeout   time.Duration
	readyTimeout    time.Duration
	notReadyGrace   time.Duration
	guardAfter      time.Duration
	smokeImage      string
	podUID          string
	probeAddress    string
	retryInterval   time.Duration
	recheckInterval time.Duration
	trialDir        string
	kubeletUnit     string
	containerdUnit  string
	node, namespace string
	// version is the shim's, which the image names (CRI_NSTARGET_VERSION;
	// else this binary's stamp).
	version string
}

func parse(args []string) (options, error) {
	o := options{node: os.Getenv("NODE_NAME"), namespace: os.Getenv("POD_NAMESPACE"), version: os.Getenv("CRI_NSTARGET_VERSION")}
	if o.version == "" {
		o.version = version
	}
	if len(args) == 0 {
		return o, errors.New("usage: cri-nstarget-install install|cleanup|version [flags]")
	}
	o.mode = args[0]
	fs := flag.NewFlagSet("cri-nstarget-install "+o.mode, flag.ContinueOnError)
	fs.StringVar(&o.root, "host-root", "/host", "where the host's / is mounted")
	fs.StringVar(&o.shim, "shim", "/usr/local/bin/cri-nstarget", "the shim's binary in the image")
	fs.StringVar(&o.unit, "unit-template", "/usr/local/share/cri-nstarget/cri-nstarget.service.in", "the shim's unit template in the image")
	fs.StringVar(&o.binDir, "bin-dir", "/usr/local/bin", "the host's directory for the shim's binary")
	fs.IntVar(&o.restarts, "max-concurrent-restarts", 1, "kubelets restarted at once across the cluster (Leases PREFIX-0..N-1)")
	fs.StringVar(&o.leasePrefix, "lease-prefix", "cri-nstarget-install", "the restart slots' Lease names")
	fs.DurationVar(&o.leaseDuration, "lease-duration", time.Minute, "a slot unrenewed this long (its pod died) is taken over")
	fs.DurationVar(&o.healthTimeout, "health-timeout", 2*time.Minute, "how long the shim may take to be healthy")
	fs.DurationVar(&o.readyTimeout, "ready-timeout", 90*time.Second, "how long the node may take to be Ready after a kubelet restart")
	fs.DurationVar(&o.notReadyGrace, "not-ready-grace", 20*time.Second, "the kubelet on the shim reporting the node NotReady this long rolls back at once")
	fs.DurationVar(&o.guardAfter, "guard-after", 2*time.Minute, "when the host's guard puts the kubelet back unless the install was confirmed (more than --ready-timeout)")
	fs.StringVar(&o.smokeImage, "smoke-image", os.Getenv("CRI_NSTARGET_IMAGE"), "an image on the node for the smoke test's container, run through the shim in this pod before the node is installed (default $CRI_NSTARGET_IMAGE; empty: this pod's own)")
	fs.StringVar(&o.podUID, "pod-uid", os.Getenv("POD_UID"), "this installer's pod uid (default $POD_UID, the downward API's metadata.uid): the smoke test's container runs in this pod, of its image unless --smoke-image; required to switch the kubelet")
	fs.StringVar(&o.probeAddress, "probe-address", "127.0.0.1:9797", "where /readyz is served")
	fs.DurationVar(&o.retryInterval, "retry-interval", 30*time.Second, "how often a node that failed, or found the apiserver out of reach, is tried again")
	fs.DurationVar(&o.recheckInterval, "recheck-interval", 5*time.Minute, "how often an installed node is checked again (install mode): a kubelet file rewritten by someone else is pointed at the shim again; 0: only at the pod's start")
	fs.StringVar(&o.trialDir, "trial-dir", os.TempDir(), "a directory of the pod's where an upgrade's new binary is tried on a socket of its own")
	fs.StringVar(&o.kubeletUnit, "kubelet-unit", "kubelet.service", "the kubelet's systemd unit")
	fs.StringVar(&o.containerdUnit, "containerd-unit", "containerd.service", "containerd's systemd unit")
	if err := fs.Parse(args[1:]); err != nil {
		return o, err
	}
	switch o.mode {
	case "version":
		return o, nil
	case "install", "cleanup":
	default:
		return o, fmt.Errorf("unknown mode %q: want install, cleanup or version", o.mode)
	}
	if o.node == "" || o.namespace == "" {
		return o, errors.New("NODE_NAME and POD_NAMESPACE must be set (the downward API: spec.nodeName, metadata.namespace)")
	}
	if o.restarts < 1 {
		return o, fmt.Errorf("--max-concurrent-restarts %d: want at least 1", o.restarts)
	}
	return o, nil
}

func main() {
	o, err := parse(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		return
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cri-nstarget-install:", err)
		os.Exit(2)
	}
	if o.mode == "version" {
		fmt.Printf("cri-nstarget-install %s (commit %s, built %s)\n", version, commit, date)
		return
	}
	log := logrus.New()
	log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	entry := log.WithField("node", o.node)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, entry); err != nil {
		entry.WithError(err).Error("cri-nstarget-install stopped; it resumes from the state on the host when started again")
		os.Exit(1)
	}
}

// readiness is what /readyz answers.
type readiness struct {
	mu     sync.Mutex
	ready  bool
	reason string
}

func (r *readiness) set(ready bool, reason string) {
	r.mu.Lock()
	r.ready, r.reason = ready, reason
	r.mu.Unlock()
}

func (r *readiness) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	r.mu.Lock()
	ready, reason := r.ready, r.reason
	r.mu.Unlock()
	if !ready {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	fmt.Fprintln(w, reason)
}

func run(ctx context.Context, o options, log *logrus.Entry) error {
	ready := &readiness{reason: o.mode + ": under way"}
	ln, err := net.Listen("tcp", o.probeAddress)
	if err != nil {
		return fmt.Errorf("serve /readyz: %w", err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/readyz" {
			http.NotFound(w, r)
			return
		}
		ready.ServeHTTP(w, r)
	}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	log.WithField("version", o.version).Info("cri-nstarget-install: " + o.mode)
	in, closeAll, err := newInstaller(ctx, o, log)
	if err != nil {
		return err
	}
	defer closeAll()
	installed := false // the last outcome: installed, and so rechecked
	op := func(ctx context.Context) (string, error) {
		if o.mode != "install" {
			return "removed", in.Remove(ctx)
		}
		installed = false
		if err := in.Install(ctx); err != nil {
			return "", err
		}
		v, err := in.Installed()
		installed = err == nil
		return "installed " + v, err
	}
	if err := settle(ctx, op, ready, o.retryInterval, log); err != nil {
		return err
	}
	every := o.recheckInterval
	if o.mode != "install" {
		every = 0
	}
	if err := recheck(ctx, op, func() bool { return installed }, ready, every, o.retryInterval, log); err != nil {
		return err
	}
	log.Info("SIGTERM: exiting; the node stays as it is")
	return nil
}

// newInstaller wires the installer to the host (systemd, mounts, CRI
// sockets under --host-root) and the apiserver (in-cluster config).
func newInstaller(ctx context.Context, o options, log *logrus.Entry) (*installer.Installer, func(), error) {
	shim, err := os.ReadFile(o.shim)
	if err != nil {
		return nil, nil, err
	}
	unit, err := os.ReadFile(o.unit)
	if err != nil {
		return nil, nil, err
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		return nil, nil, fmt.Errorf("the apiserver: %w", err)
	}
	cfg.UserAgent = "cri-nstarget-install/" + version
	nodes, events, leases, err := cluster.Clients(cfg, o.namespace)
	if err != nil {
		return nil, nil, err
	}
	node := &cluster.Node{Nodes: nodes, Events: events, Name: o.node}
	s, err := slots.New(slots.Options{
		Leases: leases, Prefix: o.leasePrefix, Count: o.restarts, Holder: o.node, Duration: o.leaseDuration,
		Waiting: func(holders []string) {
			msg := "waiting for a kubelet restart slot: held by " + strings.Join(holders, ", ")
			log.Info(msg)
			node.Event(ctx, false, "WaitingForSlot", msg)
		},
	})
	if err != nil {
		return nil, nil, err
	}
	sd, err := systemd.Dial(ctx, filepath.Join(o.root, "run/systemd/private"))
	if err != nil {
		return nil, nil, err
	}
	log.Info("connected to the host's systemd and the apiserver")
	in, err := installer.New(installer.Options{
		Root: o.root, Version: o.version, Shim: shim, UnitTemplate: unit, BinDir: o.binDir,
		KubeletUnit: o.kubeletUnit, ContainerdUnit: o.containerdUnit, HealthTimeout: o.healthTimeout, ReadyTimeout: o.readyTimeout,
		NotReadyGrace: o.notReadyGrace, GuardAfter: o.guardAfter, SmokeImage: o.smokeImage, PodUID: o.podUID,
		Systemd: sd, Cluster: node, CRI: cri.Client{}, Mounts: mounts.Host{Root: o.root, Units: sd}, Slots: s, Log: log,
		Trials: trial.Runner{Binary: o.shim, Dir: o.trialDir, CRI: cri.Client{}, Log: log.WithField("trial", o.version)},
	})
	if err != nil {
		sd.Close()
		return nil, nil, err
	}
	return in, func() { in.Close(); sd.Close() }, nil
}
