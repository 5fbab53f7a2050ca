//go:build upstream

// Package upstream runs Kubernetes' own e2e specs (e2e.test of
// hack/kubernetes.sh --upstream-e2e) against the e2e cluster twice on one
// containerd: with the kubelet's runtime containerd itself, then
// cri-nstarget in front of it; it prints the parity table and fails when a
// spec that passes directly does not pass through the shim (make
// e2e-upstream, issue 26). Each run has its own containerd, cluster and
// temporary directory, and must leave the machine as found.
package upstream

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/cluster"
	"github.com/cri-nstarget/cri-nstarget/internal/critest"
	"github.com/cri-nstarget/cri-nstarget/internal/critesting"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/internal/upstream"
)

// DefaultFocus is the specs run unless NSTARGET_UPSTREAM_FOCUS says
// otherwise: both [sig-node] Ephemeral Containers [Conformance] specs and
// the [sig-cli] kubectl debug ones, and the project's own (e2e/kubetest).
const DefaultFocus = `\[sig-node\] Ephemeral Containers .*\[Conformance\]|\[sig-cli\] kubectl debug |\[cri-nstarget\]`

// ProjectLabel is the ginkgo label of the project's own specs
// (e2e/kubetest), and with brackets a tag in their text.
const ProjectLabel = "cri-nstarget"

// env is what make e2e-upstream (and make node-conformance) passes.
type env struct {
	kubeBin, etcd, shim, containerd string
	kubelet                         string // an older kubelet than kubeBin's, or "" (kubeBin's)
	focus                           *regexp.Regexp
	skip                            string        // a ginkgo skip regexp, or ""
	project                         string        // the project's nstarget-e2e.test, or "" (not run)
	procs                           int           // ginkgo's parallel processes; 1 runs e2e.test alone
	timeout                         time.Duration // for each run of the specs
	out                             string        // the reports, the table and (on failure) the logs
	directCache                     string        // where the direct run is kept by its key, or "" (run every time)
}

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "e2e/upstream: skipped, a kubelet, containerd and runc need root")
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestParity(t *testing.T) {
	e := env{
		kubeBin: os.Getenv("NSTARGET_KUBERNETES_BIN"), etcd: os.Getenv("NSTARGET_ETCD"),
		shim: os.Getenv("NSTARGET_SHIM_BINARY"), containerd: os.Getenv("NSTARGET_CONTAINERD"),
		out: os.Getenv("NSTARGET_UPSTREAM_OUT"), project: os.Getenv("NSTARGET_PROJECT_E2E"),
		kubelet: os.Getenv("NSTARGET_KUBELET"), directCache: os.Getenv("NSTARGET_UPSTREAM_DIRECT_CACHE"),
	}
	if e.kubeBin == "" || e.etcd == "" || e.shim == "" {
		t.Fatal("NSTARGET_KUBERNETES_BIN, NSTARGET_ETCD and NSTARGET_SHIM_BINARY must be set (make e2e-upstream sets them)")
	}
	if e.containerd == "" {
		e.containerd = "containerd"
	}
	var err error
	focus := os.Getenv("NSTARGET_UPSTREAM_FOCUS")
	if focus == "" {
		focus = DefaultFocus
	}
	e.focus = regexp.MustCompile(focus)
	e.skip = os.Getenv("NSTARGET_UPSTREAM_SKIP")
	e.procs, e.timeout = 1, 20*time.Minute
	if v := os.Getenv("NSTARGET_UPSTREAM_PROCS"); v != "" {
		if e.procs, err = strconv.Atoi(v); err != nil || e.procs < 1 {
			t.Fatalf("NSTARGET_UPSTREAM_PROCS=%q: want a count", v)
		}
	}
	if v := os.Getenv("NSTARGET_UPSTREAM_TIMEOUT"); v != "" {
		if e.timeout, err = time.ParseDuration(v); err != nil {
			t.Fatalf("NSTARGET_UPSTREAM_TIMEOUT: %v", err)
		}
	}
	if e.out == "" {
		e.out = t.TempDir()
	}
	if err = os.MkdirAll(e.out, 0o755); err != nil {
		t.Fatal(err)
	}
	label, err := critest.BackendLabel(e.containerd)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	results := map[string][]upstream.Result{}
	for _, mode := range []string{"direct", "shim"} {
		t0 := time.Now()
		run := e.run
		if mode == "direct" {
			run = e.direct
		}
		r, err := run(label, mode)
		if err != nil {
			t.Fatalf("%s %s: %v", label, mode, err)
		}
		results[mode] = r
		fmt.Printf("e2e-upstream: %s %s: %d specs in %s\n", label, mode, len(r), time.Since(t0).Round(time.Second))
	}
	rows := upstream.Pair(results["direct"], results["shim"])
	table := upstream.Table(fmt.Sprintf("%s (e2e.test %s, kubelet %s), %s", label, kubeVersion(e.kubeBin), e.kubeletVersion(), time.Since(start).Round(time.Second)), rows)
	fmt.Print(table)
	if err := os.WriteFile(filepath.Join(e.out, "parity.txt"), []byte(table), 0o644); err != nil {
		t.Error(err)
	}
	if len(results["direct"]) == 0 {
		t.Errorf("no spec matched %q", focus)
	}
	for _, r := range rows {
		if r.Broken() {
			t.Errorf("passes directly, not through the shim (%s): %s: %s", r.Shim.State, r.Spec, r.Shim.Message)
		}
	}
}

// run starts containerd (with the upstream images under their names), in
// shim mode cri-nstarget in front of it, and the cluster with its
// controllers, whose kubelet's runtime is the one or the other; runs
// e2e.test; tears it all down and checks that nothing is left behind.
func (e env) run(label, mode string) (_ []upstream.Result, retErr error) {
	cgroups, err := cluster.CgroupMounts()
	if err != nil {
		return nil, err
	}
	watched := append(append([]string(nil), harness.KubeHostDirs...), cgroups...)
	tmp, err := harness.TempDir("nsu-")
	if err != nil {
		return nil, err
	}
	before := harness.ListEntries(watched)
	// What the run starts, torn down in this order by the deferred func
	// below: the pods (through the kubelet) and the cluster's processes,
	// every sandbox through the runtime the kubelet used (the shim sweeps a
	// pod's pins when its sandbox is removed through it), the shim,
	// containerd, then the cluster's mounts, cgroups and host paths (once
	// the runtime is gone); then the machine must be as found.
	var (
		backend *critest.Backend
		shim    *harness.Shim
		kube    *cluster.Cluster
	)
	endpoint := ""
	defer func() {
		if kube != nil {
			retErr = errors.Join(retErr, kube.Stop(), removeSandboxes(endpoint))
		}
		if shim != nil {
			retErr = errors.Join(retErr, shim.Close())
		}
		if backend != nil {
			retErr = errors.Join(retErr, backend.Close())
		}
		if kube != nil {
			retErr = errors.Join(retErr, kube.Close())
			if left := kube.Residue(); len(left) > 0 {
				retErr = errors.Join(retErr, fmt.Errorf("left behind by the cluster: %v", left))
			}
		}
		if leaked, _ := harness.MountsUnder(tmp); len(leaked) > 0 {
			retErr = errors.Join(retErr, fmt.Errorf("mounts left under %s: %v", tmp, leaked), harness.UnmountAll(tmp))
		}
		if left := harness.ProcessesNaming(tmp); len(left) > 0 {
			retErr = errors.Join(retErr, fmt.Errorf("processes left running: %v", left))
		}
		if retErr != nil {
			keepLogs(tmp, filepath.Join(e.out, mode))
		}
		retErr = errors.Join(retErr, os.RemoveAll(tmp))
		if added := before.Added(harness.ListEntries(watched)); len(added) > 0 {
			retErr = errors.Join(retErr, fmt.Errorf("new entries outside the run's directory: %v", added))
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	images, err := upstream.Images(harness.BusyboxPath, filepath.Join(e.kubeBin, "agnhost"))
	if err != nil {
		return nil, err
	}
	backend, err = critest.StartBackend(ctx, label, tmp, e.backendOptions(filepath.Join(tmp, "c"), images), true)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", label, err)
	}
	if err := sameImage(ctx, backend.Containerd.Endpoint(), backend.PauseImage, upstream.Ref(upstream.PauseName)); err != nil {
		return nil, err
	}

	endpoint = backend.Containerd.Endpoint()
	if mode == "shim" {
		if shim, err = harness.StartShim(ctx, e.shim, filepath.Join(tmp, "s"), backend.Containerd); err != nil {
			return nil, fmt.Errorf("start cri-nstarget: %w", err)
		}
		endpoint = shim.Endpoint()
	}

	kube, err = cluster.Start(ctx, e.clusterOptions(filepath.Join(tmp, "k"), endpoint))
	if err != nil {
		return nil, fmt.Errorf("start the cluster: %w", err)
	}
	return e.e2eTest(tmp, kube, mode)
}

// backendOptions are containerd's in dir, serving images (run's, and the
// direct run's key: nodeConfig).
func (e env) backendOptions(dir string, images map[string]*harness.Image) harness.EnvOptions {
	return harness.EnvOptions{Dir: dir, Binary: e.containerd, Images: images, RegistryAliases: upstream.Aliases}
}

// clusterOptions are the cluster's in dir, its kubelet's runtime endpoint
// (run's, and the direct run's key: nodeConfig).
func (e env) clusterOptions(dir, endpoint string) cluster.Options {
	return cluster.Options{Dir: dir, Bin: e.kubeBin, Kubelet: e.kubelet, Etcd: e.etcd, RuntimeEndpoint: endpoint, Controllers: true}
}

// e2eTest runs the specs of e2e.test, then those of the project's
// nstarget-e2e.test (when given), with the focus against the cluster, and
// reads their JUnit reports. Their temporary files and kubectl's cache go
// under tmp. A failing spec is a result, not an error; a run without a
// report is.
func (e env) e2eTest(tmp string, kube *cluster.Cluster, mode string) ([]upstream.Result, error) {
	home := filepath.Join(tmp, "home")
	if err := os.MkdirAll(filepath.Join(home, "tmp"), 0o700); err != nil {
		return nil, err
	}
	for _, s := range e.suites() {
		if err := e.specs(s.name, s.bin, s.labels, home, kube.Kubeconfig(), mode); err != nil {
			return nil, err
		}
	}
	return e.results(mode)
}

// suite is one binary of specs.
type suite struct{ name, bin, labels string }

// suites are e2e.test, and the project's nstarget-e2e.test when given. The
// project's binary also holds the upstream specs that its import of
// k8s.io/kubernetes/test/e2e registers; its own carry the label.
func (e env) suites() []suite {
	suites := []suite{{"e2e", filepath.Join(e.kubeBin, "e2e.test"), ""}}
	if e.project != "" {
		suites = append(suites, suite{"nstarget-e2e", e.project, ProjectLabel})
	}
	return suites
}

// report and logPath are where a suite's run in mode writes its JUnit
// report and its output.
func (e env) report(name, mode string) string {
	return filepath.Join(e.out, fmt.Sprintf("junit-%s-%s.xml", name, mode))
}
func (e env) logPath(name, mode string) string {
	return filepath.Join(e.out, fmt.Sprintf("%s-%s.log", name, mode))
}

// results reads the suites' reports of the run in mode.
func (e env) results(mode string) ([]upstream.Result, error) {
	var all []upstream.Result
	seen := map[string]string{} // spec -> the suite that ran it
	for _, s := range e.suites() {
		b, err := os.ReadFile(e.report(s.name, mode))
		if err != nil {
			return nil, err
		}
		r, err := upstream.ParseJUnit(b, e.focus)
		if err != nil {
			return nil, err
		}
		for _, res := range r {
			// A report lists the specs its filter left out as skipped:
			// only those with the label belong to a labelled suite.
			if s.labels != "" && !strings.Contains(res.Spec, "["+s.labels+"]") {
				continue
			}
			if first, ok := seen[res.Spec]; ok && first != s.name {
				return nil, fmt.Errorf("%s ran in both %s and %s", res.Spec, first, s.name)
			}
			seen[res.Spec] = s.name
			all = append(all, res)
		}
	}
	return all, nil
}

// specs runs one suite binary's specs; its log and JUnit report are kept in
// e.out under the suite's name and the mode. A run without a report is an
// error.
func (e env) specs(name, bin, labels, home, kubeconfig, mode string) error {
	report := e.report(name, mode)
	_ = os.Remove(report)
	logPath := e.logPath(name, mode)
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	ctx, cancel := context.WithTimeout(context.Background(), e.timeout+5*time.Minute)
	defer cancel()
	program := bin
	if e.procs > 1 {
		program = filepath.Join(e.kubeBin, "ginkgo")
	}
	cmd := exec.CommandContext(ctx, program, e.commandArgs(suite{name, bin, labels}, kubeconfig, report)...)
	cmd.Dir = home
	cmd.Env = append(os.Environ(), "HOME="+home, "TMPDIR="+filepath.Join(home, "tmp"))
	cmd.Stdout, cmd.Stderr = log, log
	runErr := cmd.Run()
	if _, err := os.Stat(report); err != nil {
		return fmt.Errorf("%s (%v) wrote no report; its log is %s: %w", filepath.Base(bin), runErr, logPath, err)
	}
	return nil
}

// commandArgs are the arguments of suite s's run: of its binary alone, or
// with e.procs > 1 of the ginkgo CLI (specs and the direct run's key).
func (e env) commandArgs(s suite, kubeconfig, report string) []string {
	if e.procs > 1 {
		return e.ginkgoArgs(s.bin, kubeconfig, s.labels, report)
	}
	return e.e2eTestArgs(kubeconfig, s.labels, report)
}

// e2eArgs are e2e.test's own flags: the skeleton provider (no cloud), the
// cluster's admin kubeconfig and kubectl, one node that must be Ready, no
// log gathering from machines it cannot reach.
func (e env) e2eArgs(kubeconfig string) []string {
	return []string{
		"--provider=skeleton",
		"--kubeconfig=" + kubeconfig,
		"--kubectl-path=" + filepath.Join(e.kubeBin, "kubectl"),
		"--num-nodes=1",
		"--disable-log-dump",
	}
}

// ginkgoFlags are the specs' selection (the focus, the skip and a label
// filter, unless "") and report, as ginkgo's flags (prefix "--ginkgo." when
// e2e.test runs alone, none for the ginkgo CLI).
func (e env) ginkgoFlags(prefix, labels, report string) []string {
	flags := []string{
		prefix + "focus=" + e.focus.String(),
		prefix + "junit-report=" + report,
		prefix + "no-color",
		prefix + "timeout=" + e.timeout.String(),
		prefix + "v",
	}
	if e.skip != "" {
		flags = append(flags, prefix+"skip="+e.skip)
	}
	if labels != "" {
		flags = append(flags, prefix+"label-filter="+labels)
	}
	return flags
}

// e2eTestArgs runs the specs in the suite binary's one process.
func (e env) e2eTestArgs(kubeconfig, labels, report string) []string {
	return append(e.e2eArgs(kubeconfig), e.ginkgoFlags("--ginkgo.", labels, report)...)
}

// ginkgoArgs runs them in e.procs processes of e2e.test under the ginkgo
// CLI, which runs the [Serial] specs alone at the end and merges the
// processes' reports into one, as Kubernetes' hack/ginkgo-e2e.sh does.
func (e env) ginkgoArgs(bin, kubeconfig, labels, report string) []string {
	args := append([]string{"--procs=" + strconv.Itoa(e.procs)}, e.ginkgoFlags("--", labels, report)...)
	args = append(args, bin, "--")
	return append(args, e.e2eArgs(kubeconfig)...)
}

// sameImage pulls both references through the CRI at endpoint and wants
// one image: the specs' pause is the sandbox image containerd runs.
func sameImage(ctx context.Context, endpoint, a, b string) error {
	conn, err := harness.Dial(endpoint)
	if err != nil {
		return err
	}
	defer conn.Close()
	images := runtimeapi.NewImageServiceClient(conn)
	var ids []string
	for _, ref := range []string{a, b} {
		resp, err := images.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: ref}})
		if err != nil {
			return fmt.Errorf("pull %s: %w", ref, err)
		}
		ids = append(ids, resp.GetImageRef())
	}
	if ids[0] != ids[1] {
		return fmt.Errorf("%s is %s, the sandbox image %s is %s: want one image", b, ids[1], a, ids[0])
	}
	return nil
}

// removeSandboxes stops and removes every pod sandbox through the CRI at
// endpoint (critesting.RemoveSandboxes).
func removeSandboxes(endpoint string) error {
	conn, err := harness.Dial(endpoint)
	if err != nil {
		return err
	}
	defer conn.Close()
	return critesting.RemoveSandboxes(runtimeapi.NewRuntimeServiceClient(conn))
}

// kubeVersion is kubectl's client version in bin, for the table's title.
func kubeVersion(bin string) string {
	out, _ := exec.Command(filepath.Join(bin, "kubectl"), "version", "--client").Output()
	if m := regexp.MustCompile(`Client Version: (\S+)`).FindSubmatch(out); m != nil {
		return string(m[1])
	}
	return "?"
}

// kubeletVersion is the kubelet's own version: NSTARGET_KUBELET's, or
// kubeBin's.
func (e env) kubeletVersion() string {
	bin := e.kubelet
	if bin == "" {
		bin = filepath.Join(e.kubeBin, "kubelet")
	}
	out, _ := exec.Command(bin, "--version").Output()
	if f := strings.Fields(string(out)); len(f) > 0 {
		return f[len(f)-1]
	}
	return "?"
}

// keepLogs copies the components' logs out of tmp into dst.
func keepLogs(tmp, dst string) {
	if err := harness.KeepLogs(tmp, dst); err != nil {
		fmt.Fprintln(os.Stderr, "e2e-upstream: keep logs:", err)
		return
	}
	fmt.Fprintf(os.Stderr, "e2e-upstream: the components' logs are in %s\n", dst)
}
