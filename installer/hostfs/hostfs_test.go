package hostfs

import (
	"os"
	"path/filepath"
	"testing"
)

func TestPath(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"run/containerd", "opt/bin", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for link, target := range map[string]string{
		"var/run":               "/run",          // absolute: from the host's root
		"usr/local/bin":         "../../opt/bin", // relative
		"etc/loop":              "/etc/loop",
		"run/containerd/c.sock": "containerd.sock",
	} {
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(link)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ p, want string }{
		{"/var/run/containerd/containerd.sock", "/run/containerd/containerd.sock"},
		{"/var/run/containerd/c.sock", "/run/containerd/containerd.sock"},
		{"/usr/local/bin/cri-nstarget", "/opt/bin/cri-nstarget"},
		{"/etc/cri-nstarget/config.toml", "/etc/cri-nstarget/config.toml"},
		{"/var/run/../etc", "/etc"},
		{"/etc/loop/x", "/etc/loop/x"}, // a loop ends, unresolved
		{"../../../../etc", "/etc"},
	} {
		if got := Path(root, tc.p); got != filepath.Join(root, tc.want) {
			t.Errorf("Path(%s) = %s, want %s", tc.p, got, filepath.Join(root, tc.want))
		}
	}
}
