//go:build integration

package integration

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/critesting"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

const (
	seesAll  = "sysv=yes mqueue=yes mqueuefs=yes shm=yes"
	seesNone = "sysv=no mqueue=no mqueuefs=no shm=no"
)

// IPC TARGET shares everything IPC means, seen from inside the containers:
// the app, in an IPC namespace of its own and with a /dev/shm that is not
// the pod's (a tmpfs given as a mount, as an emptyDir of medium Memory is),
// makes a SysV segment, a POSIX queue and a /dev/shm file (ipcprobe). The
// debug container sees all three, through /dev/mqueue too; a container of
// the same pod without TARGET sees none. The app is removed before the debug
// container starts: the pins hold all three, and they go with the debug
// container.
func TestIPCTargetSharesSysVMqueueAndShm(t *testing.T) {
	s := startShim(t)
	c := shimCRI(s)
	p := runPod(t, c, ownMode)
	shm := emptyDirMemory(t)
	app := runOwnIPC(t, c, p, pidOwn, shm, "ipcprobe make nstarget && exec sleep 3605")
	eventually(t, "the app to make its IPC objects", func() bool {
		_, err := os.Stat(filepath.Join(shm, "nstarget"))
		return err == nil
	})
	if got := execIn(t, c, app, "ipcprobe", "see", "nstarget"); got != "sysv=yes mqueue=yes mqueuefs=no shm=yes" {
		// its /dev/mqueue was mounted in the pod's namespace, before unshare
		t.Fatalf("the app itself sees %q", got)
	}
	dbg := mustCreate(t, c, p, "debug", &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_TARGET, TargetId: app})
	control := run(t, c, p, "control", pidOwn)

	// The app goes before the debug container starts: what it shares is held
	// by the pins, not found again through the app's pid.
	if _, err := c.Runtime.StopContainer(ctx(t), &runtimeapi.StopContainerRequest{ContainerId: app, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Runtime.RemoveContainer(ctx(t), &runtimeapi.RemoveContainerRequest{ContainerId: app}); err != nil {
		t.Fatal(err)
	}
	mustStart(t, c, dbg)

	if got := execIn(t, c, dbg, "ipcprobe", "see", "nstarget"); got != seesAll {
		t.Errorf("debug container with ipc TARGET sees %q, want %q", got, seesAll)
	}
	if got := execIn(t, c, dbg, "cat", "/dev/shm/nstarget"); got != "nstarget" {
		t.Errorf("the debug container's /dev/shm/nstarget holds %q", got)
	}
	if got := execIn(t, c, control, "ipcprobe", "see", "nstarget"); got != seesNone {
		t.Errorf("container without TARGET sees %q, want %q", got, seesNone)
	}
	ci := direct.Info(t, dbg)
	pin := s.StateDir() + "/pins/" + dbg + "/shm"
	r := ci.Record(t).Namespaces["ipc"]
	if r.Result != oci.Targeted || !slices.Equal(r.Shares, []string{"sysv", "mqueue", "shm"}) || r.Shm != pin || r.PodShm == "" {
		t.Errorf("ipc record = %+v, want sysv, mqueue and shm shared through %s", r, pin)
	}
	if m := specMount(ci, "/dev/shm"); m.Source != pin {
		t.Errorf("spec /dev/shm = %+v, want the pin %s", m, pin)
	}
	if m := specMount(direct.Info(t, control), "/dev/shm"); m.Source != r.PodShm {
		t.Errorf("control's /dev/shm = %+v, want the pod's %s", m, r.PodShm)
	}
	if _, err := c.Runtime.StopContainer(ctx(t), &runtimeapi.StopContainerRequest{ContainerId: dbg, Timeout: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Runtime.RemoveContainer(ctx(t), &runtimeapi.RemoveContainerRequest{ContainerId: dbg}); err != nil {
		t.Fatal(err)
	}
	if m := mountsUnder(t, s.StateDir()); len(m) > 0 {
		t.Errorf("pins left after the debug container was removed: %v", m)
	}
}

// runOwnIPC runs "app", which moves into an IPC namespace of its own
// (unshare -i, which needs CAP_SYS_ADMIN) and runs script there; shm, if
// set, is a host directory mounted at its /dev/shm.
func runOwnIPC(t *testing.T, c critesting.CRI, p pod, ns *runtimeapi.NamespaceOption, shm, script string) string {
	t.Helper()
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
		Command:  []string{"unshare", "-i", "sh", "-c", script},
		Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
			NamespaceOptions: ns,
			Capabilities:     &runtimeapi.Capability{AddCapabilities: []string{"SYS_ADMIN"}},
		}},
	}
	if shm != "" {
		cfg.Mounts = []*runtimeapi.Mount{{ContainerPath: "/dev/shm", HostPath: shm}}
	}
	app, err := createCfg(t, c, p, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mustStart(t, c, app)
	return app
}

// emptyDirMemory is a tmpfs on the host, as kubelet makes for an emptyDir
// of medium Memory; unmounted when t ends.
func emptyDirMemory(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp(tmp, "shm-")
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("nstarget-shm", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=1m,mode=1777"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
		os.Remove(dir)
	})
	return dir
}

func specMount(ci critesting.ContainerInfo, dest string) (m struct{ Type, Source string }) {
	if i := oci.MountIndex(ci.RuntimeSpec, dest); i >= 0 {
		m.Type, m.Source = ci.RuntimeSpec.Mounts[i].Type, ci.RuntimeSpec.Mounts[i].Source
	}
	return m
}
