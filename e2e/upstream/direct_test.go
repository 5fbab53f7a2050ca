//go:build upstream

package upstream

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/cri-nstarget/cri-nstarget/internal/baseline"
	"github.com/cri-nstarget/cri-nstarget/internal/cluster"
	"github.com/cri-nstarget/cri-nstarget/internal/critest"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/internal/upstream"
)

// direct is the run with the kubelet on containerd directly: the baseline
// the shim is held to, which none of the shim's code touches. With
// e.directCache it is kept under its key (upstream.DirectKey) and its
// reports are reused while the key is the same; a run with a spec that
// failed is not kept.
func (e env) direct(label, mode string) ([]upstream.Result, error) {
	if e.directCache == "" {
		return e.run(label, mode)
	}
	in, err := e.directInputs()
	if err != nil {
		return nil, err
	}
	key, err := upstream.DirectKey(in).Sum()
	if err != nil {
		return nil, err
	}
	c := baseline.Cache{Dir: e.directCache, Kind: "e2e-upstream-direct"}
	files := map[string]string{}
	for _, s := range e.suites() {
		files["junit "+s.name] = e.report(s.name, mode)
		files["log "+s.name] = e.logPath(s.name, mode)
	}
	if ok, err := c.Restore(key, files); err != nil {
		return nil, err
	} else if ok {
		r, err := e.results(mode)
		if err == nil && upstream.Clean(r) {
			fmt.Printf("e2e-upstream: direct run: cached, key %s (%s); the specs not run on containerd directly\n", key, c.Path(key))
			return r, nil
		}
		fmt.Printf("e2e-upstream: direct run: the kept run %s is not a clean run (%v); running it again\n", c.Path(key), err)
	}
	r, err := e.run(label, mode)
	if err != nil || !upstream.Clean(r) {
		fmt.Printf("e2e-upstream: direct run: ran, key %s; not kept (a spec did not pass, or the run failed)\n", key)
		return r, err
	}
	if err := c.Store(key, files); err != nil {
		return nil, fmt.Errorf("keep the direct run: %w", err)
	}
	fmt.Printf("e2e-upstream: direct run: ran, key %s; kept in %s\n", key, c.Path(key))
	return r, nil
}

// directInputs gathers what the direct run depends on.
func (e env) directInputs() (upstream.DirectInputs, error) {
	in := upstream.DirectInputs{Binaries: map[string]string{}, Focus: e.focus.String(), Skip: e.skip, Procs: e.procs, Timeout: e.timeout}
	for _, name := range []string{"e2e.test", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet", "ginkgo", "agnhost"} {
		in.Binaries[name] = filepath.Join(e.kubeBin, name)
	}
	if e.kubelet != "" {
		in.Binaries["kubelet"] = e.kubelet
	}
	if e.project != "" {
		in.Binaries["nstarget-e2e.test"] = e.project
	}
	in.Binaries["etcd"] = e.etcd
	var err error
	for role, name := range map[string]string{"containerd": e.containerd, "runc": cmp.Or(os.Getenv("NSTARGET_RUNC"), "runc")} {
		if in.Binaries[role], err = exec.LookPath(name); err != nil {
			return in, fmt.Errorf("the direct run's key: %s: %w", role, err)
		}
	}
	in.Binaries["containerd-shim-runc-v2"] = filepath.Join(filepath.Dir(in.Binaries["containerd"]), "containerd-shim-runc-v2")
	plugins, err := filepath.Glob(filepath.Join(harness.CNIBinDir, "*"))
	if err != nil {
		return in, err
	}
	for _, p := range plugins {
		in.Binaries["cni "+filepath.Base(p)] = p
	}
	if in.Images, err = upstream.Images(harness.BusyboxPath, filepath.Join(e.kubeBin, "agnhost")); err != nil {
		return in, err
	}
	if in.NodeConfig, err = e.nodeConfig(in.Images); err != nil {
		return in, fmt.Errorf("the direct run's key: %w", err)
	}
	for _, s := range e.suites() {
		s.bin = s.name // by role: the binary is keyed above by content
		in.Args += s.name + " " + strings.Join(e.commandArgs(s, "KUBECONFIG", "REPORT"), " ") + "\n"
	}
	in.Versions = "e2e.test " + kubeVersion(e.kubeBin) + ", kubelet " + e.kubeletVersion()
	kernel, err := os.ReadFile("/proc/sys/kernel/osrelease")
	in.Kernel = strings.TrimSpace(string(kernel))
	return in, err
}

// nodeConfig is what run gives containerd (on the pod network) and the
// cluster, by the same options, for the direct run's key.
func (e env) nodeConfig(images map[string]*harness.Image) (string, error) {
	c, err := critest.BackendConfig(e.backendOptions("", images), true)
	if err != nil {
		return "", err
	}
	return c + "\n" + cluster.NodeConfig(e.clusterOptions("", "")), nil
}
