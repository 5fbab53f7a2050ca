package preflight

import (
	"errors"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	conf "github.com/cri-nstarget/cri-nstarget/config"
)

// want is a Result's level and words its line must hold.
type want struct {
	level Level
	has   []string
}

func expect(t *testing.T, name string, got Result, w want) {
	t.Helper()
	line := got.String()
	if got.Level != w.level {
		t.Errorf("%s: level %v, want %v: %s", name, got.Level, w.level, line)
	}
	for _, s := range w.has {
		if !strings.Contains(line, s) {
			t.Errorf("%s: %q lacks %q", name, line, s)
		}
	}
	if got.Level != OK && got.Do == "" {
		t.Errorf("%s: a %v line says nothing to do: %s", name, got.Level, line)
	}
}

func TestKernel(t *testing.T) {
	for name, tc := range map[string]struct {
		f Facts
		w want
	}{
		"pidfd works":   {Facts{Kernel: "6.1.0"}, want{OK, []string{"kernel 6.1.0", "pidfd_open works"}}},
		"old kernel":    {Facts{Kernel: "4.19.0", Pidfd: syscall.ENOSYS}, want{Fail, []string{"4.19.0", "no pidfd_open", "Linux 5.3"}}},
		"seccomp":       {Facts{Kernel: "6.1.0", Pidfd: syscall.EPERM}, want{Fail, []string{"refused", "seccomp"}}},
		"uname fails":   {Facts{KernelErr: errors.New("boom")}, want{OK, []string{"unknown (boom)"}}},
		"another errno": {Facts{Kernel: "6.1.0", Pidfd: syscall.EINVAL}, want{Fail, []string{"pidfd_open failed"}}},
	} {
		expect(t, name, Kernel(tc.f), tc.w)
	}
}

func TestCgroup(t *testing.T) {
	expect(t, "v2", Cgroup(Facts{Cgroup2: true}), want{OK, []string{"cgroup v2"}})
	expect(t, "v1", Cgroup(Facts{}), want{Warn, []string{"cgroup v1", "kubelet 1.35"}})
	expect(t, "unknown", Cgroup(Facts{CgroupErr: errors.New("statfs: EACCES")}), want{Warn, []string{"unknown", "EACCES"}})
}

func TestBackend(t *testing.T) {
	cfg := conf.Default()
	expect(t, "answers", Backend(cfg, Facts{CRI: Answer{Name: "containerd", Version: "v2.4.2"}}),
		want{OK, []string{"unix:///run/containerd/containerd.sock answers: containerd v2.4.2"}})
	expect(t, "down", Backend(cfg, Facts{CRI: Answer{Err: errors.New("connect: no such file or directory")}}),
		want{Fail, []string{"no such file", "start containerd"}})
	expect(t, "CRI-O", Backend(cfg, Facts{CRI: Answer{Name: "cri-o", Version: "1.34.0"}}),
		want{Fail, []string{`"cri-o"`, "not containerd"}})
}

func TestContainerd(t *testing.T) {
	cfg := conf.Default()
	for name, tc := range map[string]struct {
		version string
		err     error
		w       want
	}{
		"2.4":        {"v2.4.2", nil, want{OK, []string{"containerd v2.4.2", "2.4 is supported", "active until May 2027", "NRI"}}},
		"2.3":        {"v2.3.7", nil, want{OK, []string{"2.3 is supported", "LTS until 2028"}}},
		"2.0":        {"v2.0.7", nil, want{OK, []string{"2.0 is supported", "LTS until March 2027", "Update path"}}},
		"1.7":        {"1.7.35", nil, want{Warn, []string{"1.7 is best effort", "ended September 2026", "2.4, 2.3, 2.0"}}},
		"1.6":        {"1.6.20~ds1", nil, want{Fail, []string{"1.6.20~ds1", "outside the support window", "upgrade containerd"}}},
		"2.2":        {"v2.2.1", nil, want{Fail, []string{"outside the support window"}}},
		"no answer":  {"", errors.New("connect: no such file or directory"), want{Fail, []string{"no such file", "start containerd, or set containerd_address"}}},
		"not root":   {"", errors.New("connect: permission denied"), want{Fail, []string{"permission denied", "run the check as root"}}},
		"no version": {"", nil, want{Fail, []string{"outside the support window"}}},
	} {
		expect(t, name, Containerd(cfg, Facts{API: Answer{Version: tc.version, Err: tc.err}}), tc.w)
	}
}

func TestNRI(t *testing.T) {
	gone := errors.New("connect: no such file or directory")
	via := func(v string) conf.Config { c := conf.Default(); c.TargetingVia = v; return c }
	for name, tc := range map[string]struct {
		cfg     conf.Config
		version string
		nri     error
		w       want
	}{
		"2.4, socket up":        {via("auto"), "v2.4.2", nil, want{OK, []string{"accepts connections", "can adjust namespaces", "unknown"}}},
		"2.4, no socket":        {via("auto"), "v2.4.2", gone, want{Warn, []string{"no such file", "Update path", "disable = false"}}},
		"2.4, no socket, nri":   {via("nri"), "v2.4.2", gone, want{Fail, []string{`targeting_via = "nri" refuses`}}},
		"2.0, socket up":        {via("auto"), "v2.0.7", nil, want{OK, []string{"cannot adjust namespaces", "Update path"}}},
		"2.0, socket up, nri":   {via("nri"), "v2.0.7", nil, want{Fail, []string{"cannot adjust namespaces", `targeting_via = "nri"`}}},
		"1.7, no socket":        {via("auto"), "1.7.35", gone, want{OK, []string{"could not adjust namespaces anyway"}}},
		"version unknown, up":   {via("auto"), "", nil, want{Warn, []string{"unknown"}}},
		"version unknown, gone": {via("auto"), "", gone, want{Warn, []string{"Update path"}}},
		"update":                {via("update"), "v2.4.2", gone, want{OK, []string{`targeting_via = "update"`}}},
	} {
		expect(t, name, NRI(tc.cfg, Facts{API: Answer{Version: tc.version}, NRI: tc.nri}), tc.w)
	}
}

func TestSocket(t *testing.T) {
	cfg := conf.Default()
	cfg.Listen = "unix:///run/nst/crictl/cri.sock"
	cfg.SocketGroup = "nstbar"
	dirs := func(last Dir) []Dir {
		return []Dir{{Path: "/", Mode: fs.ModeDir | 0o755}, {Path: "/run", Mode: fs.ModeDir | 0o755}, {Path: "/run/nst", Mode: fs.ModeDir | 0o755}, last}
	}
	group := Group{Name: "nstbar", GID: 1234}
	for name, tc := range map[string]struct {
		cfg conf.Config
		f   Facts
		w   want
	}{
		"made by the shim": {cfg, Facts{Group: group, SocketDirs: dirs(Dir{Path: "/run/nst/crictl", Missing: true})},
			want{OK, []string{"the shim makes /run/nst/crictl for the group"}}},
		"the group's": {cfg, Facts{Group: group, SocketDirs: dirs(Dir{Path: "/run/nst/crictl", Mode: fs.ModeDir | 0o750, GID: 1234})},
			want{OK, []string{"let the group through"}}},
		"0700 root:root": {cfg, Facts{Group: group, SocketDirs: dirs(Dir{Path: "/run/nst/crictl", Mode: fs.ModeDir | 0o700})},
			want{Fail, []string{"cannot reach it", "/run/nst/crictl is drwx------ 0:0", "chgrp nstbar /run/nst/crictl", "rmdir"}}},
		"0750 another group": {cfg, Facts{Group: group, SocketDirs: dirs(Dir{Path: "/run/nst/crictl", Mode: fs.ModeDir | 0o750, GID: 5})},
			want{Fail, []string{"cannot reach it"}}},
		"a parent closed": {cfg, Facts{Group: group, SocketDirs: []Dir{{Path: "/", Mode: fs.ModeDir | 0o755}, {Path: "/run", Mode: fs.ModeDir | 0o700}}},
			want{Fail, []string{"directory /run is"}}},
		"no such group": {cfg, Facts{Group: Group{Name: "nstbar", Err: errors.New("group: unknown group nstbar")}},
			want{Fail, []string{"unknown group", "groupadd nstbar"}}},
		"no group": {conf.Default(), Facts{Group: Group{GID: -1}, SocketDirs: []Dir{{Path: "/", Mode: fs.ModeDir | 0o755}, {Path: "/run/cri-nstarget", Mode: fs.ModeDir | 0o700}}},
			want{OK, []string{"root only", "/run/cri-nstarget is drwx------ 0:0"}}},
	} {
		expect(t, name, Socket(tc.cfg, tc.f), tc.w)
	}
}

func TestKubelet(t *testing.T) {
	cfg := conf.Default()
	for name, tc := range map[string]struct {
		ks []KubeletProc
		w  want
	}{
		"none": {nil, want{Warn, []string{"no kubelet is running"}}},
		"on containerd": {[]KubeletProc{{PID: 7, Endpoint: "unix:///run/containerd/containerd.sock", From: "/var/lib/kubelet/config.yaml"}},
			want{OK, []string{"kubelet (pid 7) uses containerd", "set by /var/lib/kubelet/config.yaml", "point the kubelet at unix:///run/cri-nstarget/cri.sock"}}},
		"on the shim, bare path": {[]KubeletProc{{PID: 7, Endpoint: "/run/cri-nstarget/cri.sock", From: "its command line"}},
			want{OK, []string{"uses the shim"}}},
		"elsewhere": {[]KubeletProc{{PID: 7, Endpoint: "unix:///run/k3s/containerd/containerd.sock", From: "its command line"}},
			want{Warn, []string{"/run/k3s/containerd/containerd.sock", "set runtime_endpoint"}}},
		"unreadable": {[]KubeletProc{{PID: 7, Err: errors.New("open /var/lib/kubelet/config.yaml: permission denied")}},
			want{Warn, []string{"unknown", "permission denied", "as root"}}},
	} {
		expect(t, name, Kubelet(cfg, Facts{Kubelets: tc.ks}), tc.w)
	}
}

func TestConfig(t *testing.T) {
	expect(t, "valid", Config("/etc/cri-nstarget/config.toml", nil), want{OK, []string{"is valid"}})
	expect(t, "invalid", Config("/etc/x.toml", errors.New("line 3: unknown key")), want{Fail, []string{"/etc/x.toml", "unknown key", "config check"}})
}

func TestWrite(t *testing.T) {
	var b strings.Builder
	if code := Write(&b, []Result{{OK, "a", ""}, {Warn, "b", "do b"}}); code != 0 {
		t.Errorf("ok and warn: exit %d, want 0", code)
	}
	if got, want := b.String(), "ok: a\nwarn: b — do b\n"; got != want {
		t.Errorf("Write printed %q, want %q", got, want)
	}
	if code := Write(&b, []Result{{OK, "a", ""}, {Fail, "c", "do c"}, {Warn, "b", "do b"}}); code != 1 {
		t.Errorf("a fail: exit %d, want 1", code)
	}
}

func TestKubeletVersion(t *testing.T) {
	bin := func(pid int, v string) KubeletBinary { return KubeletBinary{PID: pid, Path: "/proc/7/exe", Version: v} }
	for name, tc := range map[string]struct {
		bins []KubeletBinary
		w    want
	}{
		"none":      {nil, want{Warn, []string{"version unknown", "none is on PATH", "Kubernetes 1.37, 1.36, 1.35"}}},
		"1.37":      {[]KubeletBinary{bin(7, "v1.37.0")}, want{OK, []string{"kubelet (pid 7) v1.37.0", "Kubernetes 1.37 is supported"}}},
		"1.35, k3s": {[]KubeletBinary{bin(7, "v1.35.4+k3s1")}, want{OK, []string{"Kubernetes 1.35 is supported"}}},
		"on PATH": {[]KubeletBinary{{Path: "/usr/bin/kubelet", Version: "v1.36.2"}},
			want{OK, []string{"kubelet /usr/bin/kubelet (not running) v1.36.2", "1.36 is supported"}}},
		"1.38": {[]KubeletBinary{bin(7, "v1.38.0")},
			want{Warn, []string{"Kubernetes 1.38 is newer than the window", "untested", "RELEASES.md"}}},
		"1.34": {[]KubeletBinary{bin(7, "v1.34.9")},
			want{Fail, []string{"Kubernetes 1.34 is outside the window (Kubernetes 1.37, 1.36, 1.35)", "upgrade the kubelet"}}},
		"1.9 is older, not newer": {[]KubeletBinary{bin(7, "v1.9.11")}, want{Fail, []string{"1.9 is outside"}}},
		"not root": {[]KubeletBinary{{PID: 7, Path: "/proc/7/exe", Err: &fs.PathError{Op: "fork/exec", Path: "/proc/7/exe", Err: fs.ErrPermission}}},
			want{Warn, []string{"version unknown", "permission denied", "as root"}}},
		"no version": {[]KubeletBinary{{PID: 7, Err: errors.New(`no version in its --version output "hello"`)}},
			want{Warn, []string{`"hello"`, "kubelet --version"}}},
		"two, the worst says what to do": {[]KubeletBinary{bin(7, "v1.37.0"), bin(9, "v1.33.0")},
			want{Fail, []string{"pid 7) v1.37.0", "; kubelet (pid 9) v1.33.0", "upgrade the kubelet"}}},
	} {
		expect(t, name, KubeletVersion(Facts{KubeletBinaries: tc.bins}), tc.w)
	}
}
