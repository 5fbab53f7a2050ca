package namespaces

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// identityOf reads process pid's Identity from /proc, and from the kernel
// through its PID namespace, pidNS, when opened (nil: not); a process gone
// meanwhile is ErrExited.
func identityOf(pid int, pidNS *Handle) (Identity, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	cg, err := readProc(dir + "/cgroup")
	if err != nil {
		return Identity{}, err
	}
	var id Identity
	if id.Cgroups, err = parseCgroupPaths(cg); err != nil {
		return Identity{}, fmt.Errorf("%s/cgroup: %w", dir, err)
	}
	if id.IsInit, id.InitTold = initOfNS(pidNS, pid); id.InitTold {
		return id, nil
	}
	st, err := readProc(dir + "/status")
	if err != nil {
		return Identity{}, err
	}
	if id.NSpid, err = parseNSpid(st); err != nil {
		return Identity{}, fmt.Errorf("%s/status: %w", dir, err)
	}
	return id, nil
}

// initOfNS tells whether pid is the init of the PID namespace h holds, as
// the kernel translates that namespace's pid 1 into ours (one ioctl, as
// HasInit; no init there any more: pid is not it). told is false when the
// kernel cannot (before 6.10) or h is none: /proc/<pid>/status says then.
func initOfNS(h *Handle, pid int) (init, told bool) {
	if h == nil || h.Kind != PID || h.file == nil {
		return false, false
	}
	rc, err := h.file.SyscallConn()
	if err != nil {
		return false, false
	}
	var tgid uintptr
	var errno unix.Errno
	if rc.Control(func(fd uintptr) { tgid, _, errno = unix.Syscall(unix.SYS_IOCTL, fd, nsGetTGIDFromPIDNS, 1) }) != nil {
		return false, false
	}
	switch errno {
	case 0:
		return int(tgid) == pid, true
	case unix.ESRCH:
		return false, true
	}
	return false, false
}

// procReadSize is readProc's first buffer: a process's cgroup and status
// files fit in it whole.
const procReadSize = 4096

// readProc reads a /proc file whole; a process gone meanwhile is
// ErrExited. The kernel generates such a file again at every read, and
// says no size for it (os.ReadFile starts at 512 bytes and grows, several
// reads for a status file): one buffer that holds it, one read and the
// read that says its end.
func readProc(path string) (string, error) {
	b, err := readWhole(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return "", fmt.Errorf("read %s: %w", path, ErrExited)
		}
		return "", err
	}
	return string(b), nil
}

// readWhole reads the file at path into a buffer of procReadSize, grown
// only if it is full.
func readWhole(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b := make([]byte, 0, procReadSize)
	for {
		if len(b) == cap(b) {
			b = slices.Grow(b, len(b))
		}
		n, err := f.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		switch {
		case errors.Is(err, io.EOF):
			return b, nil
		case err != nil:
			return nil, err
		}
	}
}
