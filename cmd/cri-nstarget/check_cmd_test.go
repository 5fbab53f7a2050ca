package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cri-nstarget/cri-nstarget/preflight"
)

// The exit codes: 1 on a fail (no containerd here), 1 for a config that
// cannot start the shim (and no other check), 0 for -h, 2 for a bad flag.
func TestCheckCommand(t *testing.T) {
	dir := t.TempDir()
	probe := func(d time.Duration) preflight.Probe {
		return preflight.Probe{ProcRoot: dir, Root: dir, CgroupDir: "/sys/fs/cgroup", Timeout: d}
	}
	nothing := []string{"--config", "", "--runtime-endpoint", "unix://" + dir + "/c.sock", "--containerd-address", dir + "/c.sock",
		"--nri-socket", dir + "/nri.sock", "--listen", "unix://" + dir + "/shim/cri.sock", "--timeout", "1s"}
	bad := filepath.Join(dir, "bad.toml")
	if err := os.WriteFile(bad, []byte("listen = \"relative.sock\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		args  []string
		code  int
		lines []string // each a prefix of a line, in order
	}{
		"no containerd": {nothing, 1, []string{"ok: config (none", "ok: kernel", "", "fail: runtime_endpoint unix://" + dir, "fail: containerd_address", "warn: NRI socket", "ok: listen " + dir + "/shim/cri.sock", "warn: no kubelet", "warn: kubelet version unknown"}},
		"bad config":    {[]string{"--config", bad}, 1, []string{"fail: config " + bad, "fail: the other checks need a valid configuration"}},
		"help":          {[]string{"-h"}, 0, nil},
		"bad flag":      {[]string{"--no-such-flag"}, 2, nil},
	} {
		var out, errOut strings.Builder
		code := checkCommand(context.Background(), tc.args, &out, &errOut, probe)
		lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
		if code != tc.code {
			t.Errorf("%s: exit %d, want %d\n%s%s", name, code, tc.code, out.String(), errOut.String())
		}
		if tc.lines == nil {
			continue
		}
		if len(lines) != len(tc.lines) {
			t.Errorf("%s: %d lines, want %d:\n%s", name, len(lines), len(tc.lines), out.String())
			continue
		}
		for i, p := range tc.lines {
			if !strings.HasPrefix(lines[i], p) {
				t.Errorf("%s: line %d %q, want it to start with %q", name, i+1, lines[i], p)
			}
		}
	}
}

func TestConfigPath(t *testing.T) {
	dir := t.TempDir()
	f := filepath.Join(dir, "c.toml")
	os.WriteFile(f, nil, 0o644)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--config", f}, f},
		{[]string{"-config=" + f, "--listen", "/x"}, f},
		{[]string{"--config=" + dir + "/none.toml"}, dir + "/none.toml (not there: the defaults)"},
		{[]string{"--config="}, `(none, --config "": the defaults)`},
	} {
		if got := configPath(tc.args); got != tc.want {
			t.Errorf("configPath(%q) = %q, want %q", tc.args, got, tc.want)
		}
	}
}
