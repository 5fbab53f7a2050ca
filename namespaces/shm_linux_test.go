package namespaces

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

const sampleMountinfo = `22 1 0:21 / / rw,relatime - overlay overlay rw
23 22 0:5 / /dev rw,nosuid - tmpfs tmpfs rw,mode=755
30 23 0:40 / /dev/shm rw,nosuid,nodev - tmpfs shm rw,size=65536k
31 22 0:41 /pods/p1/volumes/dshm /dev/shm rw - tmpfs tmpfs rw
32 22 8:1 /srv/with\040space /data rw - ext4 /dev/sda1 rw
`

func TestLocate(t *testing.T) {
	for _, tc := range []struct {
		dir  string
		want mountRef
	}{
		{"/dev/shm", mountRef{"0:41", "/pods/p1/volumes/dshm"}}, // the last mount at /dev/shm wins
		{"/dev/null", mountRef{"0:5", "/null"}},
		{"/etc", mountRef{"0:21", "/etc"}},
		{"/data/x", mountRef{"8:1", "/srv/with space/x"}},
	} {
		got, ok := locate([]byte(sampleMountinfo), tc.dir)
		if !ok || got != tc.want {
			t.Errorf("locate(%q) = %+v %v, want %+v", tc.dir, got, ok, tc.want)
		}
	}
	if _, ok := locate(nil, "/dev/shm"); ok {
		t.Error("located in an empty mountinfo")
	}
}

func TestHostPaths(t *testing.T) {
	host := `1 0 0:41 / /var/lib/kubelet rw - tmpfs tmpfs rw
2 1 0:41 /pods /mnt/pods rw - tmpfs tmpfs rw
3 1 0:42 / /other rw - tmpfs tmpfs rw
4 1 0:41 /elsewhere /mnt/e rw - tmpfs tmpfs rw
`
	got := hostPaths([]byte(host), mountRef{"0:41", "/pods/p1/volumes/dshm"})
	want := []string{"/var/lib/kubelet/pods/p1/volumes/dshm", "/mnt/pods/p1/volumes/dshm"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hostPaths = %q, want %q", got, want)
	}
}

// A process whose /dev/shm is its own mount (in a mount namespace of its
// own, as a container's is): the pin is that directory, it outlives the
// process, and Unpin removes it.
func TestPinShmOutlivesProcess(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a mount namespace and bind-mounts")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "shm-src")
	if err := os.Mkdir(src, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := unix.Mount("nstarget-test", src, "tmpfs", 0, "size=64k"); err != nil {
		t.Skipf("tmpfs: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(src, unix.MNT_DETACH) })
	if err := os.WriteFile(filepath.Join(src, "seg"), []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	pid, stop := withOwnShm(t, "mount -n --bind "+src+" /dev/shm")
	defer stop()
	hs, err := Open(pid, []Kind{IPC, Shm})
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) != 2 || hs[1].Kind != Shm {
		t.Fatalf("handles = %+v, want ipc and shm", hs)
	}
	pin := filepath.Join(dir, "pins", "c1", "shm")
	if err := Pin(hs[1], pin); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { Unpin(pin) })
	closeAll(hs)
	stop()
	if b, err := os.ReadFile(filepath.Join(pin, "seg")); err != nil || string(b) != "x" {
		t.Fatalf("pin does not show the process's /dev/shm: %q %v", b, err)
	}
	if err := Unpin(pin); err != nil {
		t.Fatal(err)
	}
	if mounted(pin) {
		t.Error("still mounted after Unpin")
	}
	if _, err := os.Stat(pin); !os.IsNotExist(err) {
		t.Errorf("pin dir left: %v", err)
	}
}

// A process whose /dev/shm is only in its own mount namespace (nothing of
// this process's mounts reaches it) cannot be pinned, and Pin says so and
// leaves nothing.
func TestPinShmUnreachable(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a mount namespace")
	}
	pid, stop := withOwnShm(t, "mount -n -t tmpfs own /dev/shm")
	defer stop()
	hs, err := Open(pid, []Kind{Shm})
	if err != nil {
		t.Fatal(err)
	}
	defer closeAll(hs)
	pin := filepath.Join(t.TempDir(), "c1", "shm")
	if err := Pin(hs[0], pin); err == nil {
		Unpin(pin)
		t.Fatal("pinned a /dev/shm that is mounted nowhere in this mount namespace")
	}
	if _, err := os.Stat(pin); !os.IsNotExist(err) {
		t.Errorf("pin dir left: %v", err)
	}
}

// withOwnShm starts a process in a mount namespace of its own whose
// /dev/shm is what mount makes it, and returns its pid once mounted; stop
// kills it (more than once is fine). mount should be given -n: util-linux
// otherwise records the mount in /run/mount/utab, on the host's /run.
func withOwnShm(t *testing.T, mount string) (pid int, stop func()) {
	t.Helper()
	cmd := exec.Command("unshare", "--mount", "--propagation", "private", "sh", "-c",
		mount+" && touch /tmp/.nstarget-ready-$$ && exec sleep 600")
	if err := cmd.Start(); err != nil {
		t.Skipf("unshare unavailable: %v", err)
	}
	pid = cmd.Process.Pid
	ready := "/tmp/.nstarget-ready-" + strconv.Itoa(pid)
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cmd.Process.Kill()
			cmd.Wait()
			os.Remove(ready)
		})
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(ready); err == nil {
			return pid, stop
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatal("child did not mount its /dev/shm")
		}
	}
}
