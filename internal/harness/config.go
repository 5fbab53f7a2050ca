package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxSocketPath is the usable length of a unix socket path (sun_path less its NUL).
const maxSocketPath = 107

// configTemplate is containerd 1.6's config (version 2). Every path containerd,
// the CRI plugin and runc write to is inside the directory; the
// snapshotters that cannot work here are disabled to keep the log quiet.
const configTemplate = `version = 2
root = {{dir}}/root
state = {{dir}}/state
disabled_plugins = [
  "io.containerd.snapshotter.v1.aufs",
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
]

[grpc]
  address = {{sock}}

[ttrpc]
  address = {{ttrpc}}

[plugins."io.containerd.internal.v1.opt"]
  path = {{dir}}/opt

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = {{sandbox}}
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  systemd_cgroup = false
  enable_selinux = false

  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"

    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = {{dir}}/runc

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = {{dir}}/cni

  [plugins."io.containerd.grpc.v1.cri".registry.mirrors.{{registry}}]
    endpoint = [{{endpoint}}]
`

// renderConfig fills configTemplate for dir, which must be absolute.
func renderConfig(dir, registryHost, sandboxImage string) string {
	q := strconv.Quote // Go's quoting of plain paths is a valid TOML basic string.
	r := strings.NewReplacer(
		"{{dir}}/root", q(filepath.Join(dir, "root")),
		"{{dir}}/state", q(filepath.Join(dir, "state")),
		"{{dir}}/opt", q(filepath.Join(dir, "opt")),
		"{{dir}}/runc", q(runcRoot(dir)),
		"{{dir}}/cni", q(filepath.Join(dir, "cni")),
		"{{sock}}", q(socketPath(dir)),
		"{{ttrpc}}", q(socketPath(dir)+".ttrpc"),
		"{{sandbox}}", q(sandboxImage),
		"{{registry}}", q(registryHost),
		"{{endpoint}}", q("http://"+registryHost),
	)
	return r.Replace(configTemplate)
}

// socketPath is containerd's gRPC (and CRI) socket inside dir.
func socketPath(dir string) string { return filepath.Join(dir, "c.sock") }

// writeConfig creates dir's layout and writes the config; it returns the config's path.
func writeConfig(dir, registryHost, sandboxImage string) (string, error) {
	if n := len(socketPath(dir) + ".ttrpc"); n > maxSocketPath {
		return "", fmt.Errorf("dir %q is too long for unix sockets (%d > %d bytes): use a short dir such as os.MkdirTemp(\"/tmp\", \"nst-\")", dir, n, maxSocketPath)
	}
	if registryHost == "" || sandboxImage == "" {
		return "", fmt.Errorf("registry host %q and sandbox image %q: both are required", registryHost, sandboxImage)
	}
	if err := os.MkdirAll(filepath.Join(dir, "cni"), 0o755); err != nil {
		return "", fmt.Errorf("create cni conf dir: %w", err)
	}
	path := filepath.Join(dir, "config.toml")
	if err := os.WriteFile(path, []byte(renderConfig(dir, registryHost, sandboxImage)), 0o644); err != nil {
		return "", fmt.Errorf("write containerd config: %w", err)
	}
	return path, nil
}
