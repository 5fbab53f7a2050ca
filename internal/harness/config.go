package harness

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// maxSocketPath is the usable length of a unix socket path (sun_path less its NUL).
const maxSocketPath = 107

// configTemplate is containerd 1.6's and 1.7's config (version 2). Every
// path containerd, the CRI plugin and runc write to is inside the directory;
// the snapshotters that cannot work here are disabled to keep the log quiet.
// The runc shim is the one beside the containerd binary (runtime_path, which
// 1.6 and 1.7 both read): a containerd built into the cache must not run the
// machine's shim of another release. NRI is not configured: 1.7's is off by
// default (1.6 has none), so the shim takes the Update path there.
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
      runtime_path = {{shim}}

      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = {{dir}}/runc

  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = {{dir}}/cni

  [plugins."io.containerd.grpc.v1.cri".registry.mirrors.{{registry}}]
    endpoint = [{{endpoint}}]
`

// renderConfig fills configTemplate (version 2, with a mirror) for dir,
// which must be absolute.
func renderConfig(dir, registryHost, sandboxImage string) string {
	return renderConfigOpts(Options{Dir: dir, RegistryHost: registryHost, SandboxImage: sandboxImage, ConfigVersion: 2})
}

// socketPath is containerd's gRPC (and CRI) socket inside dir.
func socketPath(dir string) string { return filepath.Join(dir, "c.sock") }

// nriSocketPath is containerd 2.x's NRI socket (containerd 1.6 has none).
func nriSocketPath(dir string) string { return filepath.Join(dir, "nri.sock") }

// writeConfig creates dir's layout and writes a version 2 config; it
// returns the config's path.
func writeConfig(dir, registryHost, sandboxImage string) (string, error) {
	return writeConfigOpts(Options{Dir: dir, RegistryHost: registryHost, SandboxImage: sandboxImage, ConfigVersion: 2})
}

// mirrorsSection ends configTemplate: the registry as a mirror of itself.
const mirrorsSection = `  [plugins."io.containerd.grpc.v1.cri".registry.mirrors.{{registry}}]
    endpoint = [{{endpoint}}]
`

// hostsSectionV2 replaces mirrorsSection when registries are configured
// through hosts.toml files (config_path): containerd refuses both at once.
const hostsSectionV2 = `  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = {{certs}}
`

// configTemplateV3 is containerd 2.0-2.3's config (version 3), with the same
// layout as configTemplate. Registries are always configured through
// hosts.toml files; NRI is on a private socket and CDI, which would use host
// paths, is off; the runc shim is the one beside the containerd binary. Version 4 (containerd
// 2.4) is the same with serverSectionsV4 in place of serverSections and
// without enableCDILine.
const configTemplateV3 = `version = 3
root = {{dir}}/root
state = {{dir}}/state
disabled_plugins = [
  "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper",
  "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.erofs",
  "io.containerd.snapshotter.v1.blockfile",
]

# NRI on a private socket; no plugins launched from the machine's dirs.
[plugins."io.containerd.nri.v1.nri"]
  socket_path = {{nri}}
  plugin_path = {{dir}}/nri/plugins
  plugin_config_path = {{dir}}/nri/conf.d

[grpc]
  address = {{sock}}

[ttrpc]
  address = {{ttrpc}}

[plugins."io.containerd.internal.v1.opt"]
  path = {{dir}}/opt

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"

  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = {{sandbox}}

  [plugins."io.containerd.cri.v1.images".registry]
    config_path = {{certs}}

[plugins."io.containerd.transfer.v1.local"]
  config_path = {{certs}}

[plugins."io.containerd.cri.v1.runtime"]
  restrict_oom_score_adj = true
  enable_selinux = false
  enable_cdi = false

  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"

    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      runtime_path = {{shim}}

      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = {{dir}}/runc

  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = {{dir}}/cni
`

// certsDir holds the hosts.toml files (containerd's config_path).
func certsDir(dir string) string { return filepath.Join(dir, "certs.d") }

// cniConfPath is where Options.CNIConfList goes.
func cniConfPath(dir string) string { return filepath.Join(dir, "cni", "10-nstarget.conflist") }

// serverSections are the sockets in configs before version 4, where an unset
// ttrpc address would be the grpc one + ".ttrpc".
const serverSections = `[grpc]
  address = {{sock}}

[ttrpc]
  address = {{ttrpc}}
`

// serverSectionsV4 are the same sockets as server plugins (config version 4).
// The ttrpc address must be set: unset, it is the machine-wide
// /run/containerd/containerd.sock.ttrpc, whatever the grpc address is.
const serverSectionsV4 = `[plugins."io.containerd.server.v1.grpc"]
  address = {{sock}}

[plugins."io.containerd.server.v1.ttrpc"]
  address = {{ttrpc}}
`

// nriPluginConfigLine ends the NRI section of the version 3 (and 4) template.
const nriPluginConfigLine = "  plugin_config_path = {{dir}}/nri/conf.d\n"

// enableCDILine is in version 3 only: containerd 2.4 removed the option.
const enableCDILine = "  enable_cdi = false\n"

// runcRootLine ends the runc options in every template; runcBinaryLine
// follows it when Options.Runc names the runc binary.
const (
	runcRootLine   = "        Root = {{dir}}/runc\n"
	runcBinaryLine = "        BinaryName = {{runc}}\n"
)

// renderConfigOpts renders the config for opts (Dir absolute, ConfigVersion
// 2, 3 or 4): version 2 with mirrors unless registry aliases ask for
// hosts.toml.
func renderConfigOpts(opts Options) string {
	dir := opts.Dir
	tmpl := configTemplate
	switch {
	case opts.ConfigVersion == 4:
		tmpl = strings.Replace(configTemplateV3, "version = 3\n", "version = 4\n", 1)
		tmpl = strings.Replace(tmpl, serverSections, serverSectionsV4, 1)
		tmpl = strings.Replace(tmpl, enableCDILine, "", 1) // removed in 2.4: CDI is always on
	case opts.ConfigVersion == 3:
		tmpl = configTemplateV3
	case len(opts.RegistryAliases) > 0:
		tmpl = strings.TrimSuffix(configTemplate, mirrorsSection) + hostsSectionV2
	}
	if opts.Runc != "" {
		tmpl = strings.Replace(tmpl, runcRootLine, runcRootLine+runcBinaryLine, 1)
	}
	if opts.cniBinDir {
		tmpl = strings.Replace(tmpl, cniBinDirsLine, cniBinDirLine, 1)
	}
	if len(opts.Runtimes) > 0 {
		// each beside runc, before the CNI section of the same plugin
		plugin := `plugins."io.containerd.grpc.v1.cri"`
		if opts.ConfigVersion >= 3 {
			plugin = `plugins."io.containerd.cri.v1.runtime"`
		}
		cni := "  [" + plugin + ".cni]\n"
		tmpl = strings.Replace(tmpl, cni, extraRuntimes(plugin, opts.Runtimes)+cni, 1)
	}
	if opts.NRIValidator != "" && opts.ConfigVersion >= 3 {
		v := "\n[plugins.\"io.containerd.nri.v1.nri\".default_validator]\n"
		for _, l := range strings.Split(strings.TrimSpace(opts.NRIValidator), "\n") {
			v += "  " + l + "\n"
		}
		tmpl = strings.Replace(tmpl, nriPluginConfigLine, nriPluginConfigLine+v, 1)
	}
	q := strconv.Quote
	r := strings.NewReplacer(
		"{{dir}}/root", q(filepath.Join(dir, "root")),
		"{{dir}}/state", q(filepath.Join(dir, "state")),
		"{{dir}}/opt", q(filepath.Join(dir, "opt")),
		"{{dir}}/runc", q(runcRoot(dir)),
		"{{dir}}/cni", q(filepath.Join(dir, "cni")),
		"{{sock}}", q(socketPath(dir)),
		"{{nri}}", q(nriSocketPath(dir)),
		"{{dir}}/nri/plugins", q(filepath.Join(dir, "nri", "plugins")),
		"{{dir}}/nri/conf.d", q(filepath.Join(dir, "nri", "conf.d")),
		"{{ttrpc}}", q(socketPath(dir)+".ttrpc"),
		"{{sandbox}}", q(opts.SandboxImage),
		"{{registry}}", q(opts.RegistryHost),
		"{{endpoint}}", q("http://"+opts.RegistryHost),
		"{{certs}}", q(certsDir(dir)),
		"{{shim}}", q(runcShimPath(opts.Binary)),
		"{{runc}}", q(opts.Runc),
	)
	return r.Replace(tmpl)
}

// extraRuntimes are the runtime handlers of Options.Runtimes, in the CRI
// plugin's section plugin: each run by the runc shim, in the same runc root.
func extraRuntimes(plugin string, runtimes []Runtime) string {
	var b strings.Builder
	for _, r := range runtimes {
		typ := cmp.Or(r.Type, "io.containerd.runc.v2")
		fmt.Fprintf(&b, "    [%s.containerd.runtimes.%s]\n      runtime_type = %s\n      runtime_path = {{shim}}\n\n", plugin, r.Name, strconv.Quote(typ))
		fmt.Fprintf(&b, "      [%s.containerd.runtimes.%s.options]\n        SystemdCgroup = false\n        Root = {{dir}}/runc\n", plugin, r.Name)
		if r.BinaryName != "" {
			fmt.Fprintf(&b, "        BinaryName = %s\n", strconv.Quote(r.BinaryName))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// runcShimPath is the containerd-shim-runc-v2 beside binary, if there is
// one, else the one on PATH.
func runcShimPath(binary string) string {
	if p, err := exec.LookPath(binary); err == nil {
		beside := filepath.Join(filepath.Dir(p), "containerd-shim-runc-v2")
		if _, err := os.Stat(beside); err == nil {
			return beside
		}
	}
	if p, err := exec.LookPath("containerd-shim-runc-v2"); err == nil {
		return p
	}
	return "containerd-shim-runc-v2"
}

// hostsTOML sends pulls for a registry host to the local registry over plain HTTP.
func hostsTOML(registryHost string) string {
	return fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n", "http://"+registryHost, "http://"+registryHost)
}

// writeConfigOpts writes the config for opts and, where it uses config_path,
// a hosts.toml for the registry and each alias; it returns the config's path.
func writeConfigOpts(opts Options) (string, error) {
	dir := opts.Dir
	if n := len(socketPath(dir) + ".ttrpc"); n > maxSocketPath {
		return "", fmt.Errorf("dir %q is too long for unix sockets (%d > %d bytes): use a short dir such as harness.TempDir(\"nst-\")", dir, n, maxSocketPath)
	}
	if opts.RegistryHost == "" || opts.SandboxImage == "" {
		return "", fmt.Errorf("registry host %q and sandbox image %q: both are required", opts.RegistryHost, opts.SandboxImage)
	}
	if opts.ConfigVersion < 2 || opts.ConfigVersion > 4 {
		return "", fmt.Errorf("config version %d: want 2 (containerd 1.6, 1.7), 3 (containerd 2.0-2.3) or 4 (containerd 2.4 and later)", opts.ConfigVersion)
	}
	if err := os.MkdirAll(filepath.Join(dir, "cni"), 0o755); err != nil {
		return "", fmt.Errorf("create cni conf dir: %w", err)
	}
	files := configFiles(opts)
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", fmt.Errorf("create %s: %w", filepath.Dir(p), err)
		}
		if err := os.WriteFile(p, []byte(files[p]), 0o644); err != nil {
			return "", fmt.Errorf("write %s: %w", p, err)
		}
	}
	return configPath(dir), nil
}

// configPath is containerd's config in dir.
func configPath(dir string) string { return filepath.Join(dir, "config.toml") }

// configFiles are the files writeConfigOpts writes for opts, by path: the
// config, the CNI conflist (if any) and, where the config uses
// config_path, a hosts.toml for the registry and each alias.
func configFiles(opts Options) map[string]string {
	files := map[string]string{configPath(opts.Dir): renderConfigOpts(opts)}
	if opts.CNIConfList != "" {
		files[cniConfPath(opts.Dir)] = opts.CNIConfList
	}
	if opts.ConfigVersion >= 3 || len(opts.RegistryAliases) > 0 {
		for _, host := range append([]string{opts.RegistryHost}, opts.RegistryAliases...) {
			files[filepath.Join(certsDir(opts.Dir), host, "hosts.toml")] = hostsTOML(opts.RegistryHost)
		}
	}
	return files
}

// The CNI plugins' directory in the version 3 and 4 templates (bin_dirs,
// containerd 2.1 and later), and as containerd 2.0 reads it (bin_dir: it
// ignores bin_dirs and looks in /opt/cni/bin).
const (
	cniBinDirsLine = "    bin_dirs = [\"/usr/lib/cni\"]\n"
	cniBinDirLine  = "    bin_dir = \"/usr/lib/cni\"\n"
)

// readsCNIBinDir tells whether the containerd of a `containerd --version`
// line reads bin_dir rather than bin_dirs: 2.0.
func readsCNIBinDir(version string) bool {
	for _, f := range strings.Fields(version) {
		if strings.HasPrefix(f, "v2.0.") || strings.HasPrefix(f, "2.0.") {
			return true
		}
	}
	return false
}

// configVersionOf picks the config schema from `binary --version`: 4 for
// containerd 2.4 and later 2.x, 3 for 2.0-2.3, else 2.
func configVersionOf(binary string) (int, error) {
	out, err := exec.Command(binary, "--version").Output()
	if err != nil {
		return 0, fmt.Errorf("%s --version: %w", binary, err)
	}
	return configVersionFor(string(out)), nil
}

// configVersionFor is configVersionOf's choice for a `containerd --version` line.
func configVersionFor(version string) int {
	for _, f := range strings.Fields(version) {
		major, rest, ok := strings.Cut(strings.TrimPrefix(f, "v"), ".")
		if !ok || major != "2" {
			continue
		}
		minor, _, _ := strings.Cut(rest, ".")
		if n, err := strconv.Atoi(minor); err == nil {
			if n >= 4 {
				return 4
			}
			return 3
		}
	}
	return 2
}
