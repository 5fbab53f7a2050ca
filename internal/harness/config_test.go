package harness

import (
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
