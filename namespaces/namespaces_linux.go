package namespaces

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// Stat returns the identity of the namespace behind path (a /proc/<pid>/ns
// entry, or a pin made by Pin).
func Stat(path string) (ID, error) {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return ID{}, fmt.Errorf("stat namespace %s: %w", path, err)
	}
	return ID{Dev: st.Dev, Ino: st.Ino}, nil
}

// Same reports whether two namespace paths refer to the same namespace.
func Same(a, b string) (bool, error) {
	ia, err := Stat(a)
	if err != nil {
		return false, err
	}
	ib, err := Stat(b)
	if err != nil {
		return false, err
	}
	return ia == ib, nil
}

// Open opens /proc/<pid>/ns/<kind> for each kind (for Shm: the directory
// /proc/<pid>/root/dev/shm, and no handle if the process has none) and
// proves that every file belongs to one live process:
//
//  1. a pidfd is opened for pid, fixing the process that pid names now;
//  2. the namespace files are opened through /proc/<pid>;
//  3. the pidfd shows the process still alive, so /proc/<pid> named that same
//     process throughout step 2 (a PID is not reused while its process lives).
//
// Whether that process is the one the caller means is the caller's to
// confirm, with a source of truth of its own (cri-nstarget asks containerd
// for the pid again), once Open has returned. On success the handles keep
// the namespaces alive until closed.
func Open(pid int, kinds []Kind) ([]*Handle, error) {
	hs, _, err := open(pid, kinds, false)
	return hs, err
}

// OpenIdentified is Open, and what /proc says of the process (Identity),
// read after its namespaces were opened and before the pidfd's check that
// it is still alive: the namespaces and the identity are of the process the
// pidfd holds, the one that had pid when it was opened.
func OpenIdentified(pid int, kinds []Kind) ([]*Handle, Identity, error) {
	return open(pid, kinds, true)
}

func open(pid int, kinds []Kind, identify bool) (_ []*Handle, who Identity, retErr error) {
	if pid <= 0 {
		return nil, who, fmt.Errorf("open namespaces of pid %d: invalid pid", pid)
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, who, fmt.Errorf("pidfd_open %d: %w", pid, ErrExited)
		}
		return nil, who, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(pidfd)
	handles, err := openKinds(pid, kinds)
	if err != nil {
		return nil, who, err
	}
	defer func() {
		if retErr != nil {
			closeAll(handles)
		}
	}()
	if identify {
		if who, err = identityOf(pid, pidHandle(handles)); err != nil {
			return nil, who, err
		}
	}
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, who, fmt.Errorf("pid %d after opening its namespaces: %w", pid, ErrExited)
		}
		return nil, who, fmt.Errorf("pidfd_send_signal %d: %w", pid, err)
	}
	return handles, who, nil
}

// openKinds opens the namespaces of kinds of process pid (Shm: its
// /dev/shm, if it has one), all or none.
func openKinds(pid int, kinds []Kind) ([]*Handle, error) {
	handles := make([]*Handle, 0, len(kinds))
	for _, kind := range kinds {
		var h *Handle
		var err error
		if kind == Shm {
			h, err = openShm(pid)
		} else {
			h, err = openNS(pid, kind)
		}
		if err != nil {
			closeAll(handles)
			return nil, err
		}
		if h != nil {
			handles = append(handles, h)
		}
	}
	return handles, nil
}

// pidHandle is the PID namespace's among hs; nil if none.
func pidHandle(hs []*Handle) *Handle {
	for _, h := range hs {
		if h.Kind == PID {
			return h
		}
	}
	return nil
}

func closeAll(hs []*Handle) {
	for _, h := range hs {
		h.Close()
	}
}

// openNS opens the namespace of kind of process pid.
func openNS(pid int, kind Kind) (*Handle, error) {
	path := filepath.Join("/proc", strconv.Itoa(pid), "ns", string(kind))
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("open %s: %w", path, ErrExited)
		}
		return nil, err // an *os.PathError: "open /proc/<pid>/ns/<kind>: <reason>"
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("fstat %s: %w", path, err)
	}
	return &Handle{Kind: kind, ID: ID{Dev: st.Dev, Ino: st.Ino}, file: f}, nil
}

// Pin bind-mounts the namespace held by h onto path (created as an empty
// file, its directory 0700), so that the namespace outlives h, the process
// and this program. A Shm handle is pinned onto a directory (pinShm). Unpin
// undoes it.
func Pin(h *Handle, path string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("pin %s namespace: %w", h.Kind, err)
	}
	if h.Kind == Shm {
		return pinShm(h, path)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE|os.O_EXCL|unix.O_CLOEXEC, 0o400)
	if err != nil {
		return fmt.Errorf("pin %s namespace: create %s: %w", h.Kind, path, err)
	}
	f.Close()
	src := fmt.Sprintf("/proc/self/fd/%d", h.file.Fd())
	if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
		os.Remove(path)
		return fmt.Errorf("pin %s namespace: bind-mount onto %s: %w", h.Kind, path, err)
	}
	return nil
}

// Unpin unmounts a pin made by Pin and removes its file (directory, for Shm). A path that is
// missing or no longer mounted is not an error.
func Unpin(path string) error {
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unpin %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("unpin %s: %w", path, err)
	}
	return nil
}

// nsGetTGIDFromPIDNS is the nsfs ioctl (Linux 6.10+) that translates a
// thread-group id in the namespace of the fd into the caller's namespace:
// _IOR(0xb7, 0x7, int).
const nsGetTGIDFromPIDNS = 0x8004b707

// HasInit reports whether the PID namespace at path still has a live init
// (the process that is PID 1 inside it). Without one the kernel refuses to
// create processes in the namespace, so a container cannot join it.
//
// It asks the kernel for the host pid of the namespace's PID 1 (one ioctl);
// on kernels older than 6.10 it looks through /proc instead.
func HasInit(path string) (bool, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return false, fmt.Errorf("open pid namespace %s: %w", path, err)
	}
	defer f.Close()
	pid, _, errno := unix.Syscall(unix.SYS_IOCTL, f.Fd(), nsGetTGIDFromPIDNS, 1)
	switch errno {
	case 0:
		live, err := isLiveInit(strconv.Itoa(int(pid)))
		if errors.Is(err, os.ErrNotExist) { // reaped since
			return false, nil
		}
		return live, err
	case unix.ESRCH:
		return false, nil
	case unix.ENOTTY, unix.EINVAL:
		return scanForInit(path)
	}
	return false, fmt.Errorf("find init of pid namespace %s: %w", path, errno)
}

// scanForInit is HasInit by looking at every process in /proc.
func scanForInit(path string) (bool, error) {
	id, err := Stat(path)
	if err != nil {
		return false, err
	}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return false, fmt.Errorf("find init of pid namespace %s: %w", id, err)
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		var st unix.Stat_t
		if unix.Stat("/proc/"+e.Name()+"/ns/pid", &st) != nil || st.Dev != id.Dev || st.Ino != id.Ino {
			continue
		}
		if init, err := isLiveInit(e.Name()); err == nil && init {
			return true, nil
		}
	}
	return false, nil
}

// isLiveInit reads /proc/<pid>/status: the process is PID 1 of its own
// namespace (last NSpid field) and is neither a zombie nor dead.
func isLiveInit(pid string) (bool, error) {
	b, err := readWhole("/proc/" + pid + "/status")
	if err != nil {
		return false, err
	}
	var nspid, state []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if v, ok := bytes.CutPrefix(line, []byte("NSpid:")); ok {
			nspid = v
		} else if v, ok := bytes.CutPrefix(line, []byte("State:")); ok {
			state = bytes.TrimSpace(v)
		}
	}
	f := bytes.Fields(nspid)
	if len(f) == 0 || string(f[len(f)-1]) != "1" {
		return false, nil
	}
	return len(state) > 0 && state[0] != 'Z' && state[0] != 'X', nil
}
