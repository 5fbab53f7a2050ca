package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"strings"
	"time"

	conf "github.com/cri-nstarget/cri-nstarget/config"
	"github.com/cri-nstarget/cri-nstarget/events"
	"github.com/cri-nstarget/cri-nstarget/server"
)

// configCommand runs `cri-nstarget config default` (the defaults as TOML,
// what `make install` puts in /etc/cri-nstarget/config.toml) and
// `cri-nstarget config check [--config FILE] [flags]` (the configuration
// those would start with, or why it cannot start). It returns the exit code.
func configCommand(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprintln(stderr, "usage: cri-nstarget config default | cri-nstarget config check [--config FILE] [flags]")
		return 2
	}
	var cfg conf.Config
	switch args[0] {
	case "default":
		if len(args) > 1 {
			fmt.Fprintf(stderr, "cri-nstarget config default: unexpected arguments %q\n", args[1:])
			return 2
		}
		cfg = conf.Default()
	case "check":
		var err error
		if cfg, err = conf.Parse(args[1:], stderr, nil); err != nil {
			if !conf.IsUsage(err) {
				fmt.Fprintln(stderr, "cri-nstarget:", err)
			}
			return 2
		}
	default:
		fmt.Fprintf(stderr, "cri-nstarget config: unknown command %q (want default or check)\n", args[0])
		return 2
	}
	b, err := cfg.Marshal()
	if err != nil {
		fmt.Fprintln(stderr, "cri-nstarget:", err)
		return 1
	}
	stdout.Write(b)
	if args[0] == "check" {
		fmt.Fprintf(stdout, "\n# targeting path on this node now: %s\n", targetingPath(cfg))
		fmt.Fprintf(stdout, "# events on pods: %s\n", eventsIdentity(cfg))
	}
	return 0
}

// targetingPath says which path targeting would take with cfg, as far as
// can be told without registering with containerd's NRI (the shim also checks
// the runtime's NRI version when it connects, and logs the path it takes).
func targetingPath(cfg conf.Config) string {
	if cfg.TargetingVia == server.ViaUpdate {
		return "update (configured: targeting_via = \"update\")"
	}
	path, _ := strings.CutPrefix(cfg.NRISocket, "unix://")
	c, err := net.DialTimeout("unix", path, time.Second)
	if err != nil {
		if cfg.TargetingVia == server.ViaNRI {
			return fmt.Sprintf("none: NRI at %s is not reachable (%v), and targeting_via = \"nri\" refuses TARGET creates until it is", path, err)
		}
		return fmt.Sprintf("update: NRI at %s is not reachable (%v)", path, err)
	}
	c.Close()
	return fmt.Sprintf("nri: %s accepts connections (the shim takes NRI if the runtime's NRI version adjusts namespaces: containerd 2.2 and later)", path)
}

// eventsIdentity says who would post the Events on pods with cfg, and
// where, as far as the kubeconfig tells (in one line).
func eventsIdentity(cfg conf.Config) string {
	path := cfg.EventsKubeconfig
	if path == "" {
		return "off (events_kubeconfig is empty)"
	}
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return fmt.Sprintf("%s does not exist yet; the shim reads it when the first event is due (the kubelet writes its own once it has joined)", path)
	}
	c, err := events.Config(path)
	if err != nil {
		return "none: " + strings.ReplaceAll(err.Error(), "\n", " ")
	}
	user := events.Identity(c)
	return fmt.Sprintf("posted to %s as %s (node %s), with %s", c.Host, user, events.NodeOf(user), path)
}
