//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cri-nstarget/cri-nstarget/internal/cluster"
	"github.com/cri-nstarget/cri-nstarget/internal/critest"
	"github.com/cri-nstarget/cri-nstarget/internal/critesting"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// What the suite runs on, set up once by TestMain.
var (
	backend *critest.Backend // containerd, its registry and the CNI bridge
	shim    *harness.Shim    // cri-nstarget in front of it: the kubelet's runtime
	kube    *cluster.Cluster // etcd, kube-apiserver, kubelet
	direct  critesting.CRI   // containerd's own CRI, bypassing the shim

	baseArgs int // len(shim.Args) as started: restartShim appends to these

	busyboxImage string // runs as root
	nobodyImage  string // runs as 65534, for --profile=restricted
)

const nobodyName = "nst/busybox-nobody:1"

// alongside marks a test that only adds pods of its own and reads what
// concerns them: it runs in parallel with the others so marked, once every
// other test (those that restart the shim or the kubelet, change their
// settings, or count what the whole shim did) has ended. Most of their time
// is the kubelet's (the crash loop's back-offs, about 30 s), so the group
// takes about as long as its longest test. make's E2E_TEST lets all of them
// run at once (-parallel).
func alongside(t *testing.T) { t.Parallel() }

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e: skipped, a kubelet, containerd and runc need root")
		os.Exit(0)
	}
	start := time.Now()
	code := runSuite(m)
	fmt.Printf("e2e: %s in %s\n", map[bool]string{true: "passed", false: "FAILED"}[code == 0], time.Since(start).Round(time.Second))
	os.Exit(code)
}

func runSuite(m *testing.M) (code int) {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(os.Stderr, "e2e: "+format+"\n", args...)
		return 1
	}
	cgroups, err := cluster.CgroupMounts()
	if err != nil {
		return fail("%v", err)
	}
	watched := append(append([]string(nil), harness.KubeHostDirs...), cgroups...)
	before := harness.ListEntries(watched)
	tmp, err := harness.TempDir("nse-")
	if err != nil {
		return fail("%v", err)
	}
	// Teardown, in order: the pods (deleted through the kubelet) and the
	// cluster's processes, the shim, containerd (and the pods' containers
	// still there), the bridge, then the cluster's cgroups; then the
	// machine must be as found: nothing mounted under tmp, no cgroup of the
	// run, no new entry in the host's directories.
	var conn interface{ Close() error }
	defer func() {
		if kube != nil {
			if code != 0 {
				fmt.Fprintf(os.Stderr, "kubelet log tail:\n%s\n", tail(kube.KubeletLog(), 6000))
			}
			if err := kube.Stop(); err != nil {
				code = fail("stop the cluster: %v", err)
			}
		}
		if shim != nil && kube != nil {
			if err := critesting.RemoveSandboxes(shim.Runtime); err != nil {
				code = fail("%v", err)
			}
		}
		if shim != nil {
			if code != 0 {
				fmt.Fprintf(os.Stderr, "cri-nstarget log tail:\n%s\n", tail(shim.LogPath(), 4000))
			}
			if err := shim.Close(); err != nil {
				code = fail("stop cri-nstarget: %v", err)
			}
		}
		if conn != nil {
			conn.Close()
		}
		if backend != nil {
			if err := backend.Close(); err != nil {
				code = fail("stop containerd: %v", err)
			}
		}
		if kube != nil {
			if err := kube.Close(); err != nil {
				code = fail("remove the cluster's host state: %v", err)
			}
			if left := kube.Residue(); len(left) > 0 {
				code = fail("left behind by the cluster: %v", left)
			}
		}
		if leaked, _ := harness.MountsUnder(tmp); len(leaked) > 0 {
			code = fail("mounts left under %s: %v", tmp, leaked)
			_ = harness.UnmountAll(tmp)
		}
		if left := harness.ProcessesNaming(tmp); len(left) > 0 {
			code = fail("processes left running: %v", left)
		}
		if added := before.Added(harness.ListEntries(watched)); len(added) > 0 {
			code = fail("new entries outside the run's directory: %v", added)
		}
		if code != 0 {
			keepLogs(tmp)
		}
		os.RemoveAll(tmp)
	}()

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, _ := filepath.Abs("..")
	shimBin := os.Getenv("NSTARGET_SHIM_BINARY")
	if shimBin == "" {
		if shimBin, err = harness.BuildShim(root, tmp); err != nil {
			return fail("%v", err)
		}
	}
	kubeBin, etcd := os.Getenv("NSTARGET_KUBERNETES_BIN"), os.Getenv("NSTARGET_ETCD")
	if kubeBin == "" || etcd == "" {
		return fail("NSTARGET_KUBERNETES_BIN and NSTARGET_ETCD must be set (make e2e sets them from hack/kubernetes.sh and hack/etcd.sh)")
	}
	nobody, err := harness.BuildImage(harness.ImageOptions{Cmd: []string{"sh"}, User: "65534:65534"})
	if err != nil {
		return fail("%v", err)
	}
	binary := os.Getenv("NSTARGET_CONTAINERD")
	if binary == "" {
		binary = "containerd"
	}
	label, err := critest.BackendLabel(binary)
	if err != nil {
		return fail("%v", err)
	}
	// The stand-in for a sandboxed runtime (sandboxed_test.go): the
	// backend's runc behind a wrapper that drops the PID namespace path.
	nojoin, err := harness.BuildNojoinRuntime(root, tmp, "")
	if err != nil {
		return fail("%v", err)
	}
	t0 := time.Now()
	b, err := critest.StartBackend(ctx, label, tmp, harness.EnvOptions{
		Dir: filepath.Join(tmp, "c"), Binary: binary, Images: map[string]*harness.Image{nobodyName: nobody},
		Runtimes: []harness.Runtime{{Name: nojoinHandler, BinaryName: nojoin}},
	}, true)
	if err != nil {
		return fail("start %s: %v", label, err)
	}
	backend = b
	busyboxImage, nobodyImage = backend.BusyboxImage, backend.Registry.Ref(nobodyName)
	c, err := harness.Dial(backend.Containerd.Endpoint())
	if err != nil {
		return fail("%v", err)
	}
	conn, direct = c, critesting.New(c)

	// Metrics on a port of its own (TestCRIListStreaming reads the calls per
	// method and code); NSTARGET_SHIM_FLAGS after them, as in integration/
	// (e.g. flags that force every TARGET onto a fallback, to see the
	// targeting assertions fail).
	// The kubelet's kubeconfig as the Events' identity, as on a node: the
	// cluster writes it after the shim has started.
	kubeDir := filepath.Join(tmp, "k")
	flags := append([]string{"--metrics-address", "127.0.0.1:0", "--events-kubeconfig", cluster.KubeletKubeconfig(kubeDir)},
		strings.Fields(os.Getenv("NSTARGET_SHIM_FLAGS"))...)
	s, err := harness.StartShim(ctx, shimBin, filepath.Join(tmp, "s"), backend.Containerd, flags...)
	if err != nil {
		return fail("start cri-nstarget: %v", err)
	}
	shim, baseArgs = s, len(s.Args)
	// NSTARGET_KUBELET: an older kubelet under kubeBin's control plane, as
	// make e2e pairs them (empty: kubeBin's own).
	k, err := cluster.Start(ctx, cluster.Options{
		Dir: kubeDir, Bin: kubeBin, Kubelet: os.Getenv("NSTARGET_KUBELET"), Etcd: etcd, RuntimeEndpoint: shim.Endpoint(),
	})
	if err != nil {
		return fail("start the cluster: %v", err)
	}
	kube = k
	fmt.Printf("e2e: %s, cri-nstarget and a kubelet %s (node %s, cgroup root %s) up in %s\n",
		label, kube.KubeletVersion(), cluster.NodeName, kube.CgroupRoot(), time.Since(t0).Round(100*time.Millisecond))
	return m.Run()
}

// keepLogs copies the components' logs out of tmp into $NSTARGET_E2E_LOGS
// (make e2e: bin/e2e/LEG), when it is set.
func keepLogs(tmp string) {
	dst := os.Getenv("NSTARGET_E2E_LOGS")
	if dst == "" {
		return
	}
	if err := harness.KeepLogs(tmp, dst); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: keep logs:", err)
		return
	}
	fmt.Fprintf(os.Stderr, "e2e: the components' logs are in %s\n", dst)
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.TrimSpace(string(b))
}
