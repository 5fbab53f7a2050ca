package harness

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/pelletier/go-toml/v2"
)

func TestRenderConfig(t *testing.T) {
	cfg := renderConfig("/tmp/nst-1", "127.0.0.1:5000", "127.0.0.1:5000/nst/pause:1")
	for _, want := range []string{
		`root = "/tmp/nst-1/root"`,
		`state = "/tmp/nst-1/state"`,
		`address = "/tmp/nst-1/c.sock"`,
		`address = "/tmp/nst-1/c.sock.ttrpc"`,
		`path = "/tmp/nst-1/opt"`,
		`sandbox_image = "127.0.0.1:5000/nst/pause:1"`,
		`restrict_oom_score_adj = true`,
		`stream_server_port = "0"`,
		`SystemdCgroup = false`,
		`Root = "/tmp/nst-1/runc"`,
		`conf_dir = "/tmp/nst-1/cni"`,
		`registry.mirrors."127.0.0.1:5000"]`,
		`endpoint = ["http://127.0.0.1:5000"]`,
		`runtime_path = `,
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %s:\n%s", want, cfg)
		}
	}
	if strings.Contains(cfg, "{{") {
		t.Errorf("config has an unfilled placeholder:\n%s", cfg)
	}
}

func TestWriteConfigRejects(t *testing.T) {
	tests := []struct{ desc, dir, registry, sandbox string }{
		{"long dir", "/tmp/" + strings.Repeat("x", 100), "127.0.0.1:1", "127.0.0.1:1/p:1"},
		{"no registry", t.TempDir(), "", "127.0.0.1:1/p:1"},
		{"no sandbox image", t.TempDir(), "127.0.0.1:1", ""},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			if _, err := writeConfig(tc.dir, tc.registry, tc.sandbox); err == nil {
				t.Error("writeConfig accepted it")
			}
		})
	}
}

func TestRenderConfigV3(t *testing.T) {
	cfg := renderConfigOpts(Options{Dir: "/tmp/nst-1", RegistryHost: "127.0.0.1:5000", SandboxImage: "127.0.0.1:5000/nst/pause:1", ConfigVersion: 3, Binary: "/nonexistent/containerd"})
	for _, want := range []string{
		`version = 3`,
		`root = "/tmp/nst-1/root"`,
		`address = "/tmp/nst-1/c.sock"`,
		`sandbox = "127.0.0.1:5000/nst/pause:1"`,
		`config_path = "/tmp/nst-1/certs.d"`,
		`restrict_oom_score_adj = true`,
		`Root = "/tmp/nst-1/runc"`,
		`conf_dir = "/tmp/nst-1/cni"`,
		`"io.containerd.nri.v1.nri"`,
		`runtime_path = `,
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %s:\n%s", want, cfg)
		}
	}
	if strings.Contains(cfg, "{{") || strings.Contains(cfg, "mirrors") {
		t.Errorf("config has a placeholder or a mirror:\n%s", cfg)
	}
}

func TestWriteConfigAliases(t *testing.T) {
	dir := t.TempDir()
	path, err := writeConfigOpts(Options{Dir: dir, RegistryHost: "127.0.0.1:5000", SandboxImage: "127.0.0.1:5000/p:1",
		ConfigVersion: 2, RegistryAliases: []string{"registry.k8s.io"}, CNIConfList: `{"name":"x"}`})
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := os.ReadFile(path)
	if !strings.Contains(string(cfg), `config_path = "`+dir+`/certs.d"`) || strings.Contains(string(cfg), "mirrors") {
		t.Errorf("version 2 with aliases must use config_path and no mirror:\n%s", cfg)
	}
	for _, host := range []string{"127.0.0.1:5000", "registry.k8s.io"} {
		b, err := os.ReadFile(dir + "/certs.d/" + host + "/hosts.toml")
		if err != nil || !strings.Contains(string(b), `server = "http://127.0.0.1:5000"`) {
			t.Errorf("hosts.toml of %s: %v\n%s", host, err, b)
		}
	}
	if b, err := os.ReadFile(cniConfPath(dir)); err != nil || string(b) != `{"name":"x"}` {
		t.Errorf("cni conflist: %v %q", err, b)
	}
	for _, v := range []int{1, 5} {
		if _, err := writeConfigOpts(Options{Dir: dir, RegistryHost: "h:1", SandboxImage: "h:1/p:1", ConfigVersion: v}); err == nil {
			t.Errorf("config version %d accepted", v)
		}
	}
}

func TestRenderConfigV4(t *testing.T) {
	cfg := renderConfigOpts(Options{Dir: "/tmp/nst-1", RegistryHost: "127.0.0.1:5000", SandboxImage: "127.0.0.1:5000/nst/pause:1",
		ConfigVersion: 4, Binary: "/nonexistent/containerd", Runc: "/opt/runc/bin/runc"})
	for _, want := range []string{
		"version = 4\n",
		"[plugins.\"io.containerd.server.v1.grpc\"]\n  address = \"/tmp/nst-1/c.sock\"\n",
		"[plugins.\"io.containerd.server.v1.ttrpc\"]\n  address = \"/tmp/nst-1/c.sock.ttrpc\"\n",
		`sandbox = "127.0.0.1:5000/nst/pause:1"`,
		`config_path = "/tmp/nst-1/certs.d"`,
		`restrict_oom_score_adj = true`,
		`Root = "/tmp/nst-1/runc"`,
		`BinaryName = "/opt/runc/bin/runc"`,
		`runtime_path = `,
	} {
		if !strings.Contains(cfg, want) {
			t.Errorf("config lacks %q:\n%s", want, cfg)
		}
	}
	for _, unwanted := range []string{"{{", "version = 3", "[grpc]", "[ttrpc]", "mirrors", "enable_cdi"} {
		if strings.Contains(cfg, unwanted) {
			t.Errorf("config has %q:\n%s", unwanted, cfg)
		}
	}
}

// TestRenderConfigRunc: BinaryName is in the runc options of every version
// when Runc is set, and absent otherwise.
func TestRenderConfigRunc(t *testing.T) {
	for _, v := range []int{2, 3, 4} {
		for _, runc := range []string{"", "/opt/runc"} {
			cfg := renderConfigOpts(Options{Dir: "/tmp/nst-1", RegistryHost: "h:1", SandboxImage: "h:1/p:1", ConfigVersion: v, Runc: runc})
			want := "        Root = \"/tmp/nst-1/runc\"\n        BinaryName = \"/opt/runc\"\n"
			if got := strings.Contains(cfg, want); got != (runc != "") || (runc == "" && strings.Contains(cfg, "BinaryName")) {
				t.Errorf("version %d, runc %q: BinaryName after Root: %v:\n%s", v, runc, got, cfg)
			}
		}
	}
}

func TestConfigVersionFor(t *testing.T) {
	tests := []struct {
		version string
		want    int
	}{
		{"containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+deb12u3", 2},
		{"containerd github.com/containerd/containerd v1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da", 2},
		{"containerd github.com/containerd/containerd/v2 v2.1.4 module-proxy", 3},
		{"containerd github.com/containerd/containerd/v2 v2.3.7 abc", 3},
		{"containerd github.com/containerd/containerd/v2 v2.4.2 module-proxy", 4},
		{"containerd github.com/containerd/containerd/v2 v2.10.0 x", 4},
		{"", 2},
	}
	for _, tc := range tests {
		if got := configVersionFor(tc.version); got != tc.want {
			t.Errorf("configVersionFor(%q) = %d, want %d", tc.version, got, tc.want)
		}
	}
}

// Runtimes beside runc: each in the CRI plugin's runtimes of the config's
// version, the runc shim with its own BinaryName; the config still parses
// as TOML.
func TestRenderConfigRuntimes(t *testing.T) {
	for v, plugin := range map[int]string{2: `plugins."io.containerd.grpc.v1.cri"`, 3: `plugins."io.containerd.cri.v1.runtime"`, 4: `plugins."io.containerd.cri.v1.runtime"`} {
		cfg := renderConfigOpts(Options{Dir: "/tmp/nst-1", RegistryHost: "127.0.0.1:5000", SandboxImage: "127.0.0.1:5000/nst/pause:1", ConfigVersion: v,
			Binary: "/nonexistent/containerd", Runtimes: []Runtime{{Name: "nojoin", BinaryName: "/tmp/x/nojoinruntime"}, {Name: "vmlike", Type: "io.containerd.kata.v2"}}})
		var doc map[string]any
		if err := toml.Unmarshal([]byte(cfg), &doc); err != nil {
			t.Fatalf("version %d: %v\n%s", v, err, cfg)
		}
		for _, want := range []string{
			"[" + plugin + ".containerd.runtimes.nojoin]\n      runtime_type = \"io.containerd.runc.v2\"",
			"[" + plugin + ".containerd.runtimes.nojoin.options]",
			`BinaryName = "/tmp/x/nojoinruntime"`,
			"[" + plugin + ".containerd.runtimes.vmlike]\n      runtime_type = \"io.containerd.kata.v2\"\n      runtime_path = ",
		} {
			if !strings.Contains(cfg, want) {
				t.Errorf("version %d: config lacks %s:\n%s", v, want, cfg)
			}
		}
		if strings.Contains(cfg, "{{") {
			t.Errorf("version %d: an unfilled placeholder:\n%s", v, cfg)
		}
	}
}

// containerd 2.0 reads the CNI plugins' directory from bin_dir and ignores
// bin_dirs (2.1 and later): its pods then found no plugin in /opt/cni/bin
// (`failed to find plugin "loopback" in path [/opt/cni/bin]`, e2e on
// 2.0.14). Its config says bin_dir; every other version 3 or 4 config says
// bin_dirs.
func TestCNIBinDir(t *testing.T) {
	for _, tc := range []struct {
		version string
		want    bool
	}{
		{"containerd github.com/containerd/containerd/v2 v2.0.14 module-proxy", true},
		{"containerd github.com/containerd/containerd/v2 2.0.2~ds1 2.0.2~ds1-1", true},
		{"containerd github.com/containerd/containerd/v2 v2.1.4 module-proxy", false},
		{"containerd github.com/containerd/containerd/v2 v2.3.7 abc", false},
		{"containerd github.com/containerd/containerd/v2 v2.4.2 module-proxy", false},
		{"containerd github.com/containerd/containerd v1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da", false},
	} {
		if got := readsCNIBinDir(tc.version); got != tc.want {
			t.Errorf("readsCNIBinDir(%q) = %v, want %v", tc.version, got, tc.want)
		}
	}
	for _, binDir := range []bool{false, true} {
		cfg := renderConfigOpts(Options{Dir: "/tmp/nst-1", RegistryHost: "127.0.0.1:5000", SandboxImage: "127.0.0.1:5000/nst/pause:1",
			ConfigVersion: 3, Binary: "/nonexistent/containerd", cniBinDir: binDir})
		var doc struct {
			Plugins map[string]struct {
				CNI map[string]any `toml:"cni"`
			} `toml:"plugins"`
		}
		if err := toml.Unmarshal([]byte(cfg), &doc); err != nil {
			t.Fatalf("bin_dir %v: %v\n%s", binDir, err, cfg)
		}
		cni := doc.Plugins["io.containerd.cri.v1.runtime"].CNI
		_, hasDir := cni["bin_dir"]
		_, hasDirs := cni["bin_dirs"]
		if hasDir != binDir || hasDirs == binDir {
			t.Errorf("containerd reads bin_dir: %v; the config's CNI section: %v", binDir, cni)
		}
	}
}

// TestNodeConfig: NodeConfig is the files StartWith writes for containerd
// (here writeConfigOpts in a directory of the test's), the run's own names
// aside: the same for another directory, and changed by each option that
// changes a file.
func TestNodeConfig(t *testing.T) {
	t.Setenv("NSTARGET_RUNC", "")
	base := EnvOptions{Binary: "containerd", ConfigVersion: 4, RegistryAliases: []string{"registry.k8s.io"}, CNIConfList: `{"name": "net"}`}
	nodeConfig := func(o EnvOptions) string {
		t.Helper()
		c, err := NodeConfig(o)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	want := nodeConfig(base)

	dir, err := TempDir("nst-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	opts, err := resolveOptions(base.containerdOptions(dir, nodeConfigRegistry))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := writeConfigOpts(opts); err != nil {
		t.Fatal(err)
	}
	var written strings.Builder
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		fmt.Fprintf(&written, "== %s\n%s\n", filepath.Join(nodeConfigDir, strings.TrimPrefix(p, dir)), b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.ReplaceAll(written.String(), dir, nodeConfigDir); got != want {
		t.Errorf("written:\n%s\nNodeConfig:\n%s", got, want)
	}

	other := base
	other.Dir = "/elsewhere"
	if got := nodeConfig(other); got != want {
		t.Errorf("another directory changed it:\n%s", got)
	}
	for name, change := range map[string]func(*EnvOptions){
		"config version": func(o *EnvOptions) { o.ConfigVersion = 2 },
		"runc":           func(o *EnvOptions) { o.Runc = "/bin/true" },
		"aliases":        func(o *EnvOptions) { o.RegistryAliases = nil },
		"CNI":            func(o *EnvOptions) { o.CNIConfList = `{"name": "other"}` },
		"NRI validator":  func(o *EnvOptions) { o.NRIValidator = "enable = true" },
		"runtimes":       func(o *EnvOptions) { o.Runtimes = []Runtime{{Name: "other"}} },
	} {
		o := base
		change(&o)
		if nodeConfig(o) == want {
			t.Errorf("%s changed: NodeConfig stayed the same", name)
		}
	}
}
