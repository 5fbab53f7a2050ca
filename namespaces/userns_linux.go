package namespaces

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// nsfs ioctls (linux/nsfs.h, Linux 4.9+): the user namespace that owns a
// namespace, and the parent of a user namespace. Each returns a new fd.
const (
	nsGetUserns = 0xb701 // _IO(0xb7, 0x1)
	nsGetParent = 0xb702 // _IO(0xb7, 0x2)
)

// CanJoin reports whether a container whose user namespace is the one at
// userns (e.g. /proc/<pid>/ns/user) can join the namespace h holds. The
// kernel lets setns(2) in only with CAP_SYS_ADMIN in the user namespace that
// owns the namespace, and a container's root holds capabilities in its own
// user namespace and every descendant of it: so the owner must be userns or
// below it. The walk goes up from the owner through its parents; it ends
// where the kernel stops it (EPERM: above this process's own user namespace).
func CanJoin(h *Handle, userns string) (bool, error) {
	want, err := Stat(userns)
	if err != nil {
		return false, err
	}
	fd, err := ioctlFd(int(h.file.Fd()), nsGetUserns)
	if err != nil {
		return false, fmt.Errorf("owner of the %s namespace %s: %w", h.Kind, h.ID, err)
	}
	for {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return false, fmt.Errorf("stat user namespace: %w", err)
		}
		if (ID{Dev: st.Dev, Ino: st.Ino}) == want {
			unix.Close(fd)
			return true, nil
		}
		parent, err := ioctlFd(fd, nsGetParent)
		unix.Close(fd)
		if errors.Is(err, unix.EPERM) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("parent user namespace: %w", err)
		}
		fd = parent
	}
}

func ioctlFd(fd int, req uint) (int, error) {
	r, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), uintptr(req), 0)
	if errno != 0 {
		return -1, errno
	}
	return int(r), nil
}
