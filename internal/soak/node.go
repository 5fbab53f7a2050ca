package soak

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/cluster"
	"github.com/cri-nstarget/cri-nstarget/internal/critest"
	"github.com/cri-nstarget/cri-nstarget/internal/critesting"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// node is the soak's node: containerd (with its registry and CNI bridge),
// the shim in front of it, and the control plane with a kubelet whose
// runtime is the shim.
type node struct {
	tmp     string
	backend *critest.Backend
	kube    *cluster.Cluster
	direct  runtimeapi.RuntimeServiceClient // containerd's own CRI
	conn    *grpc.ClientConn
	api     *api   // cluster-admin's
	image   string // busybox, from the backend's registry
	kubelet string // its --version, e.g. "Kubernetes v1.35.4"

	// shimMu guards shim's process (its restarts, its pid); the faults
	// hold it while they stop and start the shim, the samplers to read it.
	shimMu sync.Mutex
	shim   *harness.Shim
}

// startNode starts containerd, the shim and the cluster in a new temporary
// directory; on failure it undoes what it did.
func startNode(ctx context.Context, cfg Config) (_ *node, retErr error) {
	tmp, err := harness.TempDir("nsk-")
	if err != nil {
		return nil, err
	}
	n := &node{tmp: tmp}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, n.stop(cfg))
		}
	}()
	label, err := critest.BackendLabel(cfg.Containerd)
	if err != nil {
		return nil, err
	}
	if n.backend, err = critest.StartBackend(ctx, label, tmp, harness.EnvOptions{
		Dir: filepath.Join(tmp, "c"), Binary: cfg.Containerd, Runc: cfg.Runc,
	}, true); err != nil {
		return nil, fmt.Errorf("start %s: %w", label, err)
	}
	n.image = n.backend.BusyboxImage
	if n.conn, err = harness.Dial(n.backend.Containerd.Endpoint()); err != nil {
		return nil, err
	}
	n.direct = runtimeapi.NewRuntimeServiceClient(n.conn)
	kubeDir := filepath.Join(tmp, "k")
	flags := append([]string{"--metrics-address", "127.0.0.1:0", "--events-kubeconfig", cluster.KubeletKubeconfig(kubeDir)}, cfg.ShimFlags...)
	if n.shim, err = harness.StartShim(ctx, cfg.ShimBinary, filepath.Join(tmp, "s"), n.backend.Containerd, flags...); err != nil {
		return nil, fmt.Errorf("start cri-nstarget: %w", err)
	}
	if n.kube, err = cluster.Start(ctx, cluster.Options{Dir: kubeDir, Bin: cfg.KubeBin, Kubelet: cfg.Kubelet, Etcd: cfg.Etcd, RuntimeEndpoint: n.shim.Endpoint()}); err != nil {
		return nil, fmt.Errorf("start the cluster: %w", err)
	}
	kubelet := cfg.Kubelet
	if kubelet == "" {
		kubelet = filepath.Join(cfg.KubeBin, "kubelet")
	}
	v, err := exec.CommandContext(ctx, kubelet, "--version").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --version: %w", kubelet, err)
	}
	n.kubelet = strings.TrimSpace(string(v))
	rc, err := clientcmd.BuildConfigFromFlags("", n.kube.Kubeconfig())
	if err != nil {
		return nil, err
	}
	rc.QPS, rc.Burst = 50, 100
	rc.Timeout = callTimeout
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	n.api = &api{dyn: dyn}
	return n, nil
}

// callTimeout is the deadline of every call the soak makes, to the CRI or
// to the apiserver: a call that reaches it hung (the watchdog).
const callTimeout = 20 * time.Second

// stop tears the node down, in the e2e suite's order: the pods (deleted
// through the kubelet) and the cluster's processes, the sandboxes still
// there (removed through the shim, which sweeps their pins), the shim,
// containerd, the cluster's host state; then nothing may be mounted under
// the run's directory. Logs are copied to cfg.Logs first.
func (n *node) stop(cfg Config) error {
	var errs []error
	if cfg.Logs != "" {
		_ = harness.KeepLogs(n.tmp, cfg.Logs)
	}
	if n.kube != nil {
		errs = append(errs, n.kube.Stop())
	}
	n.shimMu.Lock()
	defer n.shimMu.Unlock()
	if n.shim != nil && n.kube != nil {
		errs = append(errs, critesting.RemoveSandboxes(n.shim.Runtime))
	}
	if n.shim != nil {
		errs = append(errs, n.shim.Close())
	}
	if n.conn != nil {
		n.conn.Close()
	}
	if n.backend != nil {
		errs = append(errs, n.backend.Close())
	}
	if n.kube != nil {
		errs = append(errs, n.kube.Close())
		if left := n.kube.Residue(); len(left) > 0 {
			errs = append(errs, fmt.Errorf("left behind by the cluster: %v", left))
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
	return errors.Join(errs...)
}

// restartShim stops the shim (SIGKILL when kill, else SIGTERM, which must
// end in a clean exit), waits as systemd's RestartSec would, and starts it
// again with the same arguments.
func (n *node) restartShim(ctx context.Context, kill bool, restartDelay time.Duration) error {
	n.shimMu.Lock()
	defer n.shimMu.Unlock()
	var stopErr error
	if kill {
		n.shim.Kill()
	} else {
		stopErr = n.shim.Stop()
		if stopErr != nil {
			// a shim that did not exit cleanly is a finding; start the
			// next one all the same, as systemd would
			stopErr = fmt.Errorf("SIGTERM: %w", stopErr)
			n.shim.Kill()
		}
	}
	select {
	case <-time.After(restartDelay):
	case <-ctx.Done():
	}
	return errors.Join(stopErr, n.shim.Start(context.WithoutCancel(ctx)))
}

// shimPID is the running shim's pid, 0 if none.
func (n *node) shimPID() int {
	n.shimMu.Lock()
	defer n.shimMu.Unlock()
	defer func() { _ = recover() }() // no process between a stop and a start
	return n.shim.PID()
}
