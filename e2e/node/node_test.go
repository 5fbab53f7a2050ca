//go:build node

package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cri-nstarget/cri-nstarget/internal/cluster"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/internal/node"
)

// nodeName is the guest's hostname (hack/node/image.sh), which the kubelet
// registers as.
const nodeName = "nstarget-node"

// hostIP is the host's 127.0.0.1 as the guest reaches it (qemu's user
// networking).
const hostIP = "10.0.2.2"

// backend is a containerd the node runs, as a baker installs it.
type backend struct {
	name string // the subtest's
	// version is in what the CRI's Version answers (crictl version).
	version string
	// via is the path the shim targets through on it: "nri" or "update".
	via string
	// install installs it beyond Debian's containerd package (in the image).
	install string
	// config is /etc/containerd/config.toml, with sandbox as the sandbox image.
	config func(sandbox string) string
	// cluster: the cluster install's scenarios run on this node first
	// (cluster_test.go), with the kubelet on containerd until then.
	cluster bool
}

// backends: containerd 2.4.2 (with runc 1.5.2, NRI on by default) and
// Debian's 1.6.20, each with the systemd cgroup driver.
func backends() []backend {
	return []backend{
		{name: "containerd-2.4.2", version: "v2.4.2", via: "nri", install: installContainerd2, config: configV4, cluster: true},
		{name: "containerd-1.6.20", version: "1.6.20", via: "update", config: configV2},
	}
}

// installContainerd2: the 2.4 binaries in /usr/local (first on systemd's
// PATH, so runc 1.5.2 is the one containerd runs) and Debian's unit started
// on them through a drop-in.
const installContainerd2 = `
install -m 0755 /mnt/nst/containerd2/containerd /mnt/nst/containerd2/containerd-shim-runc-v2 /usr/local/bin/
install -m 0755 /mnt/nst/runc /usr/local/sbin/runc
mkdir -p /etc/systemd/system/containerd.service.d
printf '[Service]\nExecStart=\nExecStart=/usr/local/bin/containerd\n' >/etc/systemd/system/containerd.service.d/10-containerd-2.4.conf
`

func configV4(sandbox string) string {
	return fmt.Sprintf(`version = 4

[plugins."io.containerd.cri.v1.images".pinned_images]
  sandbox = %q

[plugins."io.containerd.cri.v1.images".registry]
  config_path = "/etc/containerd/certs.d"

[plugins."io.containerd.transfer.v1.local"]
  config_path = "/etc/containerd/certs.d"

[plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"

  [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
    SystemdCgroup = true

[plugins."io.containerd.cri.v1.runtime".cni]
  bin_dirs = ["/usr/lib/cni"]
  conf_dir = "/etc/cni/net.d"
`, sandbox)
}

func configV2(sandbox string) string {
	return fmt.Sprintf(`version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q

  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "/etc/containerd/certs.d"

  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = true

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "/etc/cni/net.d"
`, sandbox)
}

// TestNode runs the node's scenarios on each backend in turn, each in a
// guest of its own. The steps run in order; once one fails, the rest of
// that backend's are skipped. make node-e2e runs some of them (-run).
func TestNode(t *testing.T) {
	busybox, err := harness.BuildImage(harness.ImageOptions{Cmd: []string{"sh"}})
	if err != nil {
		t.Fatal(err)
	}
	pause, err := harness.BuildBusybox([]string{"sleep", "2147483647"})
	if err != nil {
		t.Fatal(err)
	}
	images := map[string]*harness.Image{harness.BusyboxName: busybox, harness.PauseName: pause}
	for tag, path := range map[string]string{"v1": imageV1, "v2": imageV2, "bad": imageBad, "notready": imageNotReady, "nocreate": imageNoCreate} {
		if images[installImage+":"+tag], err = loadImage(path); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := harness.StartRegistry(images)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	_, port, _ := net.SplitHostPort(reg.Host())
	registry := net.JoinHostPort(hostIP, port)
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { runNode(t, b, registry) })
	}
}

// run is one backend's node: the guest, the control plane it joins, and what
// the steps pass on.
type run struct {
	b        backend
	vm       *node.VM
	kube     *cluster.Cluster
	registry string // as the guest reaches it
	busybox  string
	app      app // the pod "app", once running
	debugs   int // debug containers made, for their names
	// appBefore is app's container and restart count before the cluster
	// install's scenarios, which must not restart it.
	appBefore containerStatus
}

func runNode(t *testing.T, b backend, registry string) {
	r := &run{b: b, registry: registry, busybox: registry + "/" + harness.BusyboxName}
	begin := time.Now()
	r.startControlPlane(t)
	r.boot(t)
	t.Logf("%s: control plane and guest up in %s", b.name, since(begin))
	type step struct {
		name string
		fn   func(*testing.T)
	}
	// The shim's journal entries and its restarts under systemd are
	// checked once per node, on the unit whichever install made it (the
	// installer renders the package's unit file): on the node of the
	// cluster install, between its install and its upgrade.
	shimUnit := []step{{"logs", r.logs}, {"restarts", r.restarts}}
	steps := []step{{"base", r.base}}
	if b.cluster {
		// The plugin mode (plugin_test.go) first, on the kubelet on
		// containerd as the node starts: no kubelet restart of its own.
		steps = append(steps, step{"plugin", r.pluginMode})
		steps = append(steps, step{"cluster-bad", r.clusterBad}, step{"cluster-notready", r.clusterNotReady},
			step{"cluster-guard", r.clusterGuard}, step{"cluster-install", r.clusterInstall})
		steps = append(steps, shimUnit...)
		steps = append(steps, step{"cluster-upgrade", r.clusterUpgrade}, step{"cluster-cleanup", r.clusterCleanup},
			step{"install", r.install}, step{"debug", r.debugTarget})
	} else {
		steps = append(steps, step{"install", r.install}, step{"debug", r.debugTarget})
		steps = append(steps, shimUnit...)
	}
	for _, step := range append(steps, step{"package", r.packageLife}, step{"reboot", r.reboot}) {
		start := time.Now()
		ok := t.Run(step.name, step.fn)
		t.Logf("%s: step %s: %s", b.name, step.name, since(start))
		if !ok {
			return
		}
	}
}

func since(t time.Time) time.Duration { return time.Since(t).Round(100 * time.Millisecond) }

func (r *run) startControlPlane(t *testing.T) {
	dir, err := os.MkdirTemp("", "nst-node-cp-")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// The controllers run for the cluster install's DaemonSet (its
	// controller, the scheduler, service accounts and their tokens).
	k, err := cluster.Start(ctx, cluster.Options{
		Dir: dir, Bin: kubeBin, Etcd: etcdBin, RemoteNode: true, ServerIPs: []net.IP{net.ParseIP(hostIP)}, Controllers: true,
	})
	if err != nil {
		os.RemoveAll(dir)
		t.Fatal(err)
	}
	r.kube = k
	t.Cleanup(func() {
		if err := k.Stop(); err != nil {
			t.Errorf("stop the control plane: %v", err)
		}
		if err := k.Close(); err != nil {
			t.Errorf("close the control plane: %v", err)
		}
		os.RemoveAll(dir)
	})
}

func (r *run) boot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	opts := node.Options{Image: nodeImage, Agent: nodeAgent, Accel: nodeAccel}
	if nodeCPUs != "" {
		n, err := strconv.Atoi(nodeCPUs)
		if err != nil || n < 1 {
			t.Fatalf("NSTARGET_NODE_CPUS=%q: want a number of vCPUs", nodeCPUs)
		}
		opts.CPUs = n
	}
	if nodeLogs != "" {
		if err := os.MkdirAll(nodeLogs, 0o755); err != nil {
			t.Fatal(err)
		}
		opts.Console = filepath.Join(nodeLogs, r.b.name+"-console.log")
	}
	vm, err := node.Boot(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	r.vm = vm
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		start := time.Now()
		r.keepJournal(ctx, t)
		kept := since(start)
		if err := vm.Stop(ctx); err != nil {
			t.Errorf("stop the guest: %v", err)
		}
		t.Logf("%s: journal kept in %s, guest powered off in %s", r.b.name, kept, since(start))
	})
	if _, err := vm.WaitRunning(ctx); err != nil {
		t.Fatal(err)
	}
}

// keepJournal copies the guest's journal (every boot) to nodeLogs.
func (r *run) keepJournal(ctx context.Context, t *testing.T) {
	if nodeLogs == "" {
		return
	}
	name := r.b.name + "-journal.txt"
	if _, err := r.vm.Run(ctx, "journalctl --no-pager -o short-monotonic >/mnt/nst/"+name+" 2>&1"); err != nil {
		t.Logf("keep the guest's journal: %v", err)
		return
	}
	if b, err := os.ReadFile(filepath.Join(r.vm.Share, name)); err == nil {
		_ = os.WriteFile(filepath.Join(nodeLogs, name), b, 0o644)
	}
}

// sh runs script in the guest (as root, under set -eu) and returns its
// standard output; a failure ends the test with its standard error.
func (r *run) sh(t *testing.T, timeout time.Duration, script string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	res, err := r.vm.Run(ctx, "set -eu\n"+script)
	if err == nil && res.Code != 0 {
		err = fmt.Errorf("exit status %d", res.Code)
	}
	if err != nil {
		t.Fatalf("in the guest: %v\n%s\nstderr: %s", err, strings.TrimSpace(script), res.Stderr)
	}
	return strings.TrimSpace(string(res.Stdout))
}

// share copies a host file into the share, under name.
func (r *run) share(t *testing.T, from, name string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	r.write(t, name, b, mode)
}

func (r *run) write(t *testing.T, name string, b []byte, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(r.vm.Share, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, mode); err != nil {
		t.Fatal(err)
	}
}
