package preflight

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	conf "github.com/cri-nstarget/cri-nstarget/config"
	"github.com/cri-nstarget/cri-nstarget/support"
)

// Kubelet: the runtime endpoint each kubelet on the node runs with, and
// what to do with it.
func Kubelet(cfg conf.Config, f Facts) Result {
	if len(f.Kubelets) == 0 {
		return Result{Warn, "no kubelet is running: its runtime endpoint unknown", "run the check again once the kubelet runs, before pointing it at the shim"}
	}
	var lines []string
	level, do := OK, ""
	for _, k := range f.Kubelets {
		switch {
		case k.Err != nil:
			lines = append(lines, fmt.Sprintf("kubelet (pid %d): runtime endpoint unknown: %v", k.PID, oneLine(k.Err)))
			level, do = max(level, Warn), "run the check as root; the endpoint is the kubelet's --container-runtime-endpoint, else containerRuntimeEndpoint of its --config"
		case sameSocket(k.Endpoint, cfg.Listen):
			lines = append(lines, fmt.Sprintf("kubelet (pid %d) uses the shim, %s (set by %s)", k.PID, k.Endpoint, k.From))
		case sameSocket(k.Endpoint, cfg.RuntimeEndpoint):
			lines = append(lines, fmt.Sprintf("kubelet (pid %d) uses containerd, %s (set by %s)", k.PID, k.Endpoint, k.From))
			if do == "" {
				do = "once the shim runs, point the kubelet at " + cfg.Listen + " there (README, quick start)"
			}
		default:
			lines = append(lines, fmt.Sprintf("kubelet (pid %d) uses %s (set by %s): neither the shim's listen nor its runtime_endpoint %s", k.PID, k.Endpoint, k.From, cfg.RuntimeEndpoint))
			level, do = max(level, Warn), "set runtime_endpoint to the socket the kubelet uses: the shim must front the containerd the kubelet runs on"
		}
	}
	return Result{level, strings.Join(lines, "; "), do}
}

// sameSocket says whether two endpoints ("unix:///path" or "/path") name
// the same socket.
func sameSocket(a, b string) bool {
	return socketPath(a) == socketPath(b)
}

// KubeletVersion: each running kubelet's version (else the one on PATH)
// against the Kubernetes minors the shim supports (package support).
func KubeletVersion(f Facts) Result {
	window := "Kubernetes " + strings.Join(support.Kubernetes, ", ")
	if len(f.KubeletBinaries) == 0 {
		return Result{Warn, "kubelet version unknown: no kubelet runs, and none is on PATH",
			"run the check on a node with its kubelet installed; the shim supports " + window}
	}
	var lines []string
	level, do := OK, ""
	for _, k := range f.KubeletBinaries {
		r := kubeletVersionLine(k, window)
		lines = append(lines, r.What)
		if r.Level > level || do == "" { // what to do about the worst line
			level, do = max(level, r.Level), r.Do
		}
	}
	return Result{level, strings.Join(lines, "; "), do}
}

// kubeletVersionLine is KubeletVersion's line for one binary.
func kubeletVersionLine(k KubeletBinary, window string) Result {
	who := fmt.Sprintf("kubelet (pid %d)", k.PID)
	if k.PID == 0 {
		who = fmt.Sprintf("kubelet %s (not running)", k.Path)
	}
	if k.Err != nil {
		do := "see `kubelet --version`; the shim supports " + window
		if errors.Is(k.Err, fs.ErrPermission) {
			do = "run the check as root: the kubelet's binary is root's to see"
		}
		return Result{Warn, fmt.Sprintf("%s: version unknown: %v", who, oneLine(k.Err)), do}
	}
	minor, place, err := support.KubernetesPlace(k.Version)
	switch {
	case err != nil:
		return Result{Warn, fmt.Sprintf("%s: version unknown: %v", who, err), "see `kubelet --version`; the shim supports " + window}
	case place == support.Newer:
		return Result{Warn, fmt.Sprintf("%s %s: Kubernetes %s is newer than the window (%s), untested behind the shim", who, k.Version, minor, window),
			"a cri-nstarget minor release adds it once CI runs it (RELEASES.md, How the window follows); until then keep a kubelet of " + window + " or run it untested"}
	case place == support.Older:
		return Result{Fail, fmt.Sprintf("%s %s: Kubernetes %s is outside the window (%s)", who, k.Version, minor, window),
			"upgrade the kubelet to a supported minor first: the window is Kubernetes' own three newest (RELEASES.md)"}
	}
	return Result{OK, fmt.Sprintf("%s %s: Kubernetes %s is supported", who, k.Version, minor), ""}
}
