package preflight

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"

	conf "github.com/cri-nstarget/cri-nstarget/config"
	"github.com/cri-nstarget/cri-nstarget/support"
)

// nriMinContainerd is the first containerd whose NRI carries namespace
// adjustments (NRI v0.10.0, nriplugin.MinVersion).
const nriMinContainerd = "2.2"

// Checks are the lines of `cri-nstarget check`, in the order they are
// printed, for cfg and what was read of the node.
func Checks(cfg conf.Config, f Facts) []Result {
	return []Result{
		Kernel(f), Cgroup(f), Backend(cfg, f), Containerd(cfg, f), NRI(cfg, f),
		Socket(cfg, f), Kubelet(cfg, f), KubeletVersion(f),
	}
}

// Config is the line for the configuration: path, and why it cannot start
// the shim (nil: it can).
func Config(path string, err error) Result {
	if err != nil {
		return Result{Fail, fmt.Sprintf("config %s: %v", path, err), "fix it: `cri-nstarget config check` shows the configuration it starts with; `cri-nstarget config default` the defaults"}
	}
	return Result{OK, fmt.Sprintf("config %s is valid", path), ""}
}

// Kernel: pidfd_open(2) works (Linux 5.3 and later, and no seccomp filter
// in the way).
func Kernel(f Facts) Result {
	kernel := f.Kernel
	if f.KernelErr != nil {
		kernel = fmt.Sprintf("unknown (%v)", f.KernelErr)
	}
	switch {
	case f.Pidfd == nil:
		return Result{OK, fmt.Sprintf("kernel %s: pidfd_open works", kernel), ""}
	case errors.Is(f.Pidfd, syscall.ENOSYS):
		return Result{Fail, fmt.Sprintf("kernel %s has no pidfd_open (%v)", kernel, f.Pidfd), "Linux 5.3 or later is needed: upgrade the kernel"}
	case errors.Is(f.Pidfd, syscall.EPERM):
		return Result{Fail, fmt.Sprintf("kernel %s: pidfd_open refused (%v), a seccomp filter or an LSM", kernel, f.Pidfd),
			"run the check as the unit runs the shim; the unit must allow pidfd_open (operations.md, Reference: kernel features)"}
	}
	return Result{Fail, fmt.Sprintf("kernel %s: pidfd_open failed: %v", kernel, f.Pidfd), "Linux 5.3 or later is needed"}
}

// Cgroup: v2 is what the kubelet wants; the shim itself works on both.
func Cgroup(f Facts) Result {
	switch {
	case f.CgroupErr != nil:
		return Result{Warn, fmt.Sprintf("cgroup version unknown: %v", f.CgroupErr), "mount cgroup v2 at /sys/fs/cgroup"}
	case f.Cgroup2:
		return Result{OK, "cgroup v2 at /sys/fs/cgroup", ""}
	}
	return Result{Warn, "cgroup v1 at /sys/fs/cgroup: kubelet 1.35 and later refuse it by default",
		"boot with cgroup v2 (systemd.unified_cgroup_hierarchy=1); the shim itself works on both"}
}

// Backend: the backend's CRI answers on runtime_endpoint, and is containerd.
func Backend(cfg conf.Config, f Facts) Result {
	ep := cfg.RuntimeEndpoint
	if f.CRI.Err != nil {
		return Result{Fail, fmt.Sprintf("runtime_endpoint %s: CRI Version: %v", ep, oneLine(f.CRI.Err)),
			unreachable(f.CRI.Err, "start containerd (systemctl start containerd), or set runtime_endpoint to its socket")}
	}
	if f.CRI.Name != "containerd" {
		return Result{Fail, fmt.Sprintf("runtime_endpoint %s answers as %q %s, not containerd", ep, f.CRI.Name, f.CRI.Version),
			"put containerd behind the shim: it targets through containerd's NRI and API"}
	}
	return Result{OK, fmt.Sprintf("runtime_endpoint %s answers: containerd %s", ep, f.CRI.Version), ""}
}

// Containerd: containerd's API answers on containerd_address, and its
// version is in the support window (package support).
func Containerd(cfg conf.Config, f Facts) Result {
	addr := cfg.ContainerdAddress
	if f.API.Err != nil {
		return Result{Fail, fmt.Sprintf("containerd_address %s: containerd's version service: %v", addr, oneLine(f.API.Err)),
			unreachable(f.API.Err, "start containerd, or set containerd_address to its socket (grpc.address in its config): targeting reads container specs and pids there")}
	}
	v := f.API.Version
	line, ok := support.LineOf(v)
	switch {
	case !ok:
		return Result{Fail, fmt.Sprintf("containerd %s (at %s) is outside the support window: %s", v, addr, support.Window()),
			"upgrade containerd to a supported release (RELEASES.md)"}
	case line.Status == support.BestEffort:
		return Result{Warn, fmt.Sprintf("containerd %s (at %s): %s is best effort (containerd's own support %s; targeting takes %s)", v, addr, line.Minor, line.Upstream, line.Path),
			"upgrade containerd to a supported release: " + support.Window()}
	}
	return Result{OK, fmt.Sprintf("containerd %s (at %s): %s is supported (containerd: %s; targeting takes %s)", v, addr, line.Minor, line.Upstream, line.Path), ""}
}

// NRI: whether containerd's NRI is there, and whether its version can
// adjust namespaces. Whether its validator refuses them is not visible from
// outside containerd: said to be unknown.
func NRI(cfg conf.Config, f Facts) Result {
	if cfg.TargetingVia == "update" {
		return Result{OK, "NRI not used: targeting_via = \"update\"", ""}
	}
	sock := cfg.NRISocket
	adjusts, known := nriAdjusts(f.API.Version)
	if f.NRI != nil {
		what := fmt.Sprintf("NRI socket %s: %v", sock, oneLine(f.NRI))
		switch {
		case cfg.TargetingVia == "nri":
			return Result{Fail, what + `; targeting_via = "nri" refuses TARGET creates while it is not usable`,
				`enable NRI in containerd ([plugins."io.containerd.nri.v1.nri"] disable = false), set nri_socket, or targeting_via = "auto"`}
		case known && !adjusts:
			return Result{OK, what + fmt.Sprintf("; containerd %s's NRI could not adjust namespaces anyway: targeting takes the Update path", f.API.Version), ""}
		}
		return Result{Warn, what + ": targeting takes the Update path (a spec update right after CreateContainer)",
			`for NRI (the debug container made in its target's namespaces from the start): enable it in containerd ([plugins."io.containerd.nri.v1.nri"] disable = false) or set nri_socket`}
	}
	what := fmt.Sprintf("NRI socket %s accepts connections", sock)
	switch {
	case !known:
		return Result{Warn, what + "; whether containerd's NRI adjusts namespaces: unknown (its version is unknown)", "see the containerd lines above"}
	case !adjusts:
		if cfg.TargetingVia == "nri" {
			return Result{Fail, what + fmt.Sprintf(`; containerd %s's NRI cannot adjust namespaces (%s and later can), and targeting_via = "nri" refuses TARGET creates`, f.API.Version, nriMinContainerd),
				`targeting_via = "auto" (the Update path), or containerd ` + nriMinContainerd + " or later"}
		}
		return Result{OK, what + fmt.Sprintf("; containerd %s's NRI cannot adjust namespaces (%s and later can): targeting takes the Update path", f.API.Version, nriMinContainerd), ""}
	}
	return Result{OK, what + fmt.Sprintf("; containerd %s's NRI can adjust namespaces: targeting takes NRI. Whether its validator refuses them (default_validator.reject_namespace_adjustment) cannot be seen from outside: unknown", f.API.Version),
		"if it does, the first targeted create falls back to the Update path, and the log says why"}
}

// nriAdjusts says whether containerd version v has an NRI that adjusts
// namespaces; known is false when v is not a version.
func nriAdjusts(v string) (adjusts, known bool) {
	m, err := support.Minor(v)
	if err != nil {
		return false, false
	}
	var maj, min, wantMaj, wantMin int
	fmt.Sscanf(m, "%d.%d", &maj, &min)
	fmt.Sscanf(nriMinContainerd, "%d.%d", &wantMaj, &wantMin)
	return maj > wantMaj || maj == wantMaj && min >= wantMin, true
}

func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", " ") }

// unreachable is what to do about a socket that did not answer with err:
// run as root where the socket refused the caller, else do.
func unreachable(err error, do string) string {
	if strings.Contains(err.Error(), "permission denied") {
		return "run the check as root, as the shim runs: the socket is root's"
	}
	return do
}

// socketPath is the file of a unix endpoint (config has checked its form).
func socketPath(endpoint string) string {
	p, _ := strings.CutPrefix(endpoint, "unix://")
	return filepath.Clean(p)
}
