package namespaces

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"
)

// ofAfterRead, set by tests only, runs between reading the namespaces and
// asking the pidfd whether the process is still unreaped.
var ofAfterRead func(pid int)

// Of reads the identity of process pid's namespaces of each kind (not Shm)
// through a pidfd, as Open reads them, without holding them open:
//
//  1. a pidfd is opened for pid, fixing the process that pid names now;
//  2. each /proc/<pid>/ns/<kind> is stat'd;
//  3. the pidfd shows the process not yet reaped, so /proc/<pid> named that
//     same process throughout step 2 (a pid is not reused while its process,
//     a zombie included, holds it).
//
// Whether that process is the one the caller means is the caller's to
// confirm, with a source of truth of its own, for a time after Of has
// returned (cri-nstarget asks containerd: the task's pid, and whether it had
// exited by then). ErrExited: the process was gone before or while its
// namespaces were read (a zombie's ipc namespace is already gone).
func Of(pid int, kinds []Kind) (map[Kind]ID, error) {
	if pid <= 0 {
		return nil, fmt.Errorf("namespaces of pid %d: invalid pid", pid)
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("pidfd_open %d: %w", pid, ErrExited)
		}
		return nil, fmt.Errorf("pidfd_open %d: %w", pid, err)
	}
	defer unix.Close(pidfd)
	ids := make(map[Kind]ID, len(kinds))
	for _, kind := range kinds {
		path := filepath.Join("/proc", strconv.Itoa(pid), "ns", string(kind))
		var st unix.Stat_t
		if err := unix.Stat(path, &st); err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ESRCH) {
				return nil, fmt.Errorf("stat %s: %w", path, ErrExited)
			}
			return nil, fmt.Errorf("stat %s: %w", path, err)
		}
		ids[kind] = ID{Dev: st.Dev, Ino: st.Ino}
	}
	if ofAfterRead != nil {
		ofAfterRead(pid)
	}
	if err := unix.PidfdSendSignal(pidfd, 0, nil, 0); err != nil {
		if errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("pid %d after reading its namespaces: %w", pid, ErrExited)
		}
		return nil, fmt.Errorf("pidfd_send_signal %d: %w", pid, err)
	}
	return ids, nil
}
