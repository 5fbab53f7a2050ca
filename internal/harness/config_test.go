package harness

import (
	"os"
	"strings"
	"testing"
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
	if _, err := writeConfigOpts(Options{Dir: dir, RegistryHost: "h:1", SandboxImage: "h:1/p:1", ConfigVersion: 4}); err == nil {
		t.Error("config version 4 accepted")
	}
}
