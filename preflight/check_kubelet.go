package preflight

import (
	"fmt"
	"strings"

	conf "github.com/cri-nstarget/cri-nstarget/config"
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
