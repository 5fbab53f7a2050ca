package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

func TestResolveBuild(t *testing.T) {
	vcs := func(version string, settings ...string) *debug.BuildInfo {
		bi := &debug.BuildInfo{Main: debug.Module{Path: "github.com/cri-nstarget/cri-nstarget", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			bi.Settings = append(bi.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return bi
	}
	const sha = "3d454d9c0ffee3d454d9c0ffee3d454d9c0ffee0"
	for _, tc := range []struct {
		desc                string
		ldVersion, ldCommit string
		ldDate              string
		bi                  *debug.BuildInfo
		want                build
	}{
		{desc: "make build: the linker's stamps win",
			ldVersion: "v1.2.3", ldCommit: sha, ldDate: "2025-11-23T10:39:00Z",
			bi:   vcs("(devel)", "vcs.revision", "ffff", "vcs.time", "2000-01-01T00:00:00Z"),
			want: build{"v1.2.3", sha, "2025-11-23T10:39:00Z"}},
		{desc: "go build in a checkout: pseudo-version and vcs settings",
			bi:   vcs("v0.0.0-20251123103900-3d454d9c0ffe+dirty", "vcs.revision", sha, "vcs.time", "2025-11-23T10:39:00Z", "vcs.modified", "true"),
			want: build{"v0.0.0-20251123103900-3d454d9c0ffe+dirty", sha + "-dirty", "2025-11-23T10:39:00Z"}},
		{desc: "go install @v1.2.3: the module version, no vcs",
			bi:   vcs("v1.2.3"),
			want: build{"v1.2.3", "unknown", "unknown"}},
		{desc: "go build -buildvcs=false: nothing is known, and it says so",
			bi:   vcs("(devel)"),
			want: build{"(devel)", "unknown", "unknown"}},
		{desc: "no build info at all",
			want: build{"(devel)", "unknown", "unknown"}},
		{desc: "a stamped version, the rest from vcs",
			ldVersion: "v1.2.3",
			bi:        vcs("(devel)", "vcs.revision", sha, "vcs.time", "2025-11-23T10:39:00Z", "vcs.modified", "false"),
			want:      build{"v1.2.3", sha, "2025-11-23T10:39:00Z"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := resolveBuild(tc.ldVersion, tc.ldCommit, tc.ldDate, tc.bi)
			if got != tc.want {
				t.Errorf("resolveBuild = %+v, want %+v", got, tc.want)
			}
			s := got.String()
			for _, part := range []string{"cri-nstarget " + tc.want.Version + " ", "commit " + tc.want.Commit, "built " + tc.want.Date, runtime.Version()} {
				if !strings.Contains(s, part) {
					t.Errorf("String() = %q, lacks %q", s, part)
				}
			}
		})
	}
}

// TestVersionFlag builds the binary as `make build` does and as a plain `go
// build` does, and runs --version: the stamps when given, never a bare "dev".
func TestVersionFlag(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		desc    string
		ldflags string
		want    []string
	}{
		{desc: "stamped", ldflags: "-X main.version=v9.8.7 -X main.commit=abc123 -X main.date=2025-11-23T10:39:00Z",
			want: []string{"cri-nstarget v9.8.7 (commit abc123, built 2025-11-23T10:39:00Z; CRI v1, go"}},
		{desc: "plain go build", want: []string{"cri-nstarget ", "(commit ", ", built "}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			bin := filepath.Join(dir, strings.ReplaceAll(tc.desc, " ", "-"))
			build := exec.Command("go", "build", "-ldflags", tc.ldflags, "-o", bin, ".")
			if out, err := build.CombinedOutput(); err != nil {
				t.Fatalf("go build: %v\n%s", err, out)
			}
			out, err := exec.Command(bin, "--version").Output()
			if err != nil {
				t.Fatalf("--version: %v", err)
			}
			s := string(out)
			if strings.Count(s, "\n") != 1 {
				t.Errorf("--version = %q, want one line", s)
			}
			for _, w := range tc.want {
				if !strings.Contains(s, w) {
					t.Errorf("--version = %q, lacks %q", s, w)
				}
			}
			if strings.Contains(s, " dev ") || strings.Contains(s, " dev\n") {
				t.Errorf("--version = %q: a bare dev", s)
			}
		})
	}
	_ = os.Remove(dir)
}
