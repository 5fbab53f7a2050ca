package preflight

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	versionapi "github.com/containerd/containerd/api/services/version/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	conf "github.com/cri-nstarget/cri-nstarget/config"
)

// fakeContainerd answers CRI Version; fakeVersion containerd's Version
// (serveFake serves both on one socket, as containerd does).
type fakeContainerd struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	version string
}

func (f *fakeContainerd) Version(ctx context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: f.version}, nil
}

type fakeVersion struct {
	versionapi.UnimplementedVersionServer
	version string
}

func (f fakeVersion) Version(context.Context, *emptypb.Empty) (*versionapi.VersionResponse, error) {
	return &versionapi.VersionResponse{Version: f.version, Revision: "fake"}, nil
}

// serveFake serves a fake containerd of version on a socket in a temp dir.
func serveFake(t *testing.T, version string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "nst-pf")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "c.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer()
	runtimeapi.RegisterRuntimeServiceServer(s, &fakeContainerd{version: version})
	versionapi.RegisterVersionServer(s, fakeVersion{version: version})
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return path
}

func TestGatherContainerd(t *testing.T) {
	sock := serveFake(t, "v2.4.2")
	cfg := conf.Default()
	cfg.RuntimeEndpoint, cfg.ContainerdAddress = "unix://"+sock, sock
	cfg.NRISocket = sock // a socket that accepts connections
	f := Gather(context.Background(), cfg, Probe{ProcRoot: t.TempDir(), Root: "/", CgroupDir: "/sys/fs/cgroup", Timeout: 2 * time.Second})
	if f.CRI != (Answer{Name: "containerd", Version: "v2.4.2"}) || f.API != (Answer{Version: "v2.4.2"}) || f.NRI != nil {
		t.Errorf("Gather: CRI %+v, API %+v, NRI %v; want containerd v2.4.2 on both, NRI reachable", f.CRI, f.API, f.NRI)
	}
	if f.Pidfd != nil || f.Kernel == "" {
		t.Errorf("Gather: kernel %q, pidfd %v; want this kernel's, pidfd_open working", f.Kernel, f.Pidfd)
	}
	if r := Containerd(cfg, f); r.Level != OK {
		t.Errorf("Containerd on a fake 2.4.2: %s", r)
	}
}

func TestGatherNothingThere(t *testing.T) {
	dir := t.TempDir()
	cfg := conf.Default()
	cfg.RuntimeEndpoint, cfg.ContainerdAddress, cfg.NRISocket = "unix://"+dir+"/none.sock", dir+"/none.sock", dir+"/nri.sock"
	start := time.Now()
	f := Gather(context.Background(), cfg, Probe{ProcRoot: dir, Root: "/", CgroupDir: "/sys/fs/cgroup", Timeout: 5 * time.Second})
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("Gather took %v with no socket there: want it to fail fast, not wait out the timeout", d)
	}
	for name, err := range map[string]error{"CRI": f.CRI.Err, "API": f.API.Err, "NRI": f.NRI} {
		if err == nil || !strings.Contains(err.Error(), "no such file or directory") {
			t.Errorf("%s: %v, want no such file or directory", name, err)
		}
	}
}

// A fake /proc: the kubelet (by comm), its cmdline naming a config file
// under a fake root, and a process that is not the kubelet.
func TestKubelets(t *testing.T) {
	proc, root := t.TempDir(), t.TempDir()
	write := func(p, s string) {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(proc, "42", "comm"), "kubelet\n")
	write(filepath.Join(proc, "42", "cmdline"), "/usr/bin/kubelet\x00--config=/var/lib/kubelet/config.yaml\x00")
	write(filepath.Join(root, "var/lib/kubelet/config.yaml"), "kind: KubeletConfiguration\ncontainerRuntimeEndpoint: unix:///run/containerd/containerd.sock\n")
	write(filepath.Join(proc, "7", "comm"), "containerd\n")
	write(filepath.Join(proc, "7", "cmdline"), "/usr/bin/containerd\x00")
	write(filepath.Join(proc, "9", "comm"), "kubelet\n")
	write(filepath.Join(proc, "9", "cmdline"), "/usr/bin/kubelet\x00--container-runtime-endpoint\x00unix:///run/cri-nstarget/cri.sock\x00")
	ks := kubelets(proc, root)
	want := []KubeletProc{
		{PID: 9, Endpoint: "unix:///run/cri-nstarget/cri.sock", From: "its command line (--container-runtime-endpoint)"},
		{PID: 42, Endpoint: "unix:///run/containerd/containerd.sock", From: "/var/lib/kubelet/config.yaml"},
	}
	if len(ks) != len(want) {
		t.Fatalf("kubelets: %+v, want %+v", ks, want)
	}
	for i := range want {
		if ks[i] != want[i] {
			t.Errorf("kubelet %d: %+v, want %+v", i, ks[i], want[i])
		}
	}
	os.Remove(filepath.Join(root, "var/lib/kubelet/config.yaml"))
	if ks := kubelets(proc, root); len(ks) != 2 || !errors.Is(ks[1].Err, fs.ErrNotExist) {
		t.Errorf("kubelets with its config gone: %+v, want pid 42's error, not found", ks)
	}
}

func TestSocketDirs(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o710); err != nil {
		t.Fatal(err)
	}
	ds := socketDirs(filepath.Join(dir, "a", "b"))
	if ds[0].Path != "/" || len(ds) < 3 {
		t.Fatalf("socketDirs: %+v, want / first", ds)
	}
	n := len(ds)
	mine, a, b := ds[n-3], ds[n-2], ds[n-1]
	if mine.Path != dir || mine.Missing || mine.Mode.Perm() != 0o710 || mine.UID != os.Getuid() || !a.Missing || !b.Missing {
		t.Errorf("socketDirs: %+v, %+v, %+v; want %s 0710 of uid %d, then two missing", mine, a, b, dir, os.Getuid())
	}
}

func TestLookupGroup(t *testing.T) {
	if g := lookupGroup(""); g.GID != -1 || g.Err != nil {
		t.Errorf(`lookupGroup(""): %+v, want none`, g)
	}
	if g := lookupGroup("4321"); g.GID != 4321 || g.Err != nil {
		t.Errorf(`lookupGroup("4321"): %+v, want gid 4321`, g)
	}
	if g := lookupGroup("root"); g.GID != 0 || g.Err != nil {
		t.Errorf(`lookupGroup("root"): %+v, want gid 0`, g)
	}
	if g := lookupGroup("no-such-group-nst"); g.Err == nil {
		t.Errorf("lookupGroup of an unknown group: %+v, want an error", g)
	}
}

func TestCgroup2(t *testing.T) {
	// A temp dir is no cgroup2fs; its statfs answers.
	if v2, err := cgroup2(t.TempDir()); v2 || err != nil {
		t.Errorf("cgroup2(tmp) = %v, %v; want false, nil", v2, err)
	}
	if _, err := cgroup2("/nonexistent-nst"); !errors.Is(err, syscall.ENOENT) {
		t.Errorf("cgroup2 of nothing: %v, want ENOENT", err)
	}
}

// A running kubelet's version is its binary's (a fake /proc's exe, a
// script that answers as the kubelet does); with none running, the
// kubelet on the probe's PATH; with neither, nothing.
func TestKubeletBinaries(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	proc := filepath.Join(dir, "proc")
	exe := func(pid, target string) {
		if err := os.MkdirAll(filepath.Join(proc, pid), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, filepath.Join(proc, pid, "exe")); err != nil {
			t.Fatal(err)
		}
	}
	exe("42", script("k137", `[ "$1" = --version ] && echo "Kubernetes v1.37.1"`))
	exe("43", script("hello", "echo hello"))
	exe("44", script("hangs", "exec sleep 10"))
	pathDir := filepath.Join(dir, "bin")
	os.Mkdir(pathDir, 0o755)
	os.Rename(script("kubelet", `echo "Kubernetes v1.36.3"`), filepath.Join(pathDir, "kubelet"))
	p := Probe{ProcRoot: proc, Timeout: 500 * time.Millisecond, Path: "/nonexistent-nst:" + pathDir}

	got := kubeletBinaries(context.Background(), p, []KubeletProc{{PID: 42}, {PID: 43}, {PID: 44}})
	if len(got) != 3 || got[0] != (KubeletBinary{PID: 42, Path: filepath.Join(proc, "42", "exe"), Version: "v1.37.1"}) {
		t.Fatalf("kubeletBinaries of pid 42: %+v, want v1.37.1 from its exe", got)
	}
	if got[1].Err == nil || !strings.Contains(got[1].Err.Error(), `no version in its --version output "hello"`) {
		t.Errorf("pid 43: %+v, want no version in its output", got[1])
	}
	if got[2].Err == nil || !strings.Contains(got[2].Err.Error(), "no answer within 500ms") {
		t.Errorf("pid 44: %+v, want no answer", got[2])
	}
	got = kubeletBinaries(context.Background(), p, nil)
	if len(got) != 1 || got[0] != (KubeletBinary{Path: filepath.Join(pathDir, "kubelet"), Version: "v1.36.3"}) {
		t.Errorf("kubeletBinaries with none running: %+v, want v1.36.3 from %s", got, pathDir)
	}
	p.Path = ""
	if got = kubeletBinaries(context.Background(), p, nil); len(got) != 0 {
		t.Errorf("kubeletBinaries with none running and none on PATH: %+v, want none", got)
	}
}
