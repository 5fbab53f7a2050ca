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

// identityOf reads process pid's Identity from /proc; a process gone
// meanwhile is ErrExited.
func identityOf(pid int) (Identity, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	cg, err := readProc(dir + "/cgroup")
	if err != nil {
		return Identity{}, err
	}
	st, err := readProc(dir + "/status")
	if err != nil {
		return Identity{}, err
	}
	var id Identity
	if id.Cgroups, err = parseCgroupPaths(cg); err != nil {
		return Identity{}, fmt.Errorf("%s/cgroup: %w", dir, err)
	}
	if id.NSpid, err = parseNSpid(st); err != nil {
		return Identity{}, fmt.Errorf("%s/status: %w", dir, err)
	}
	return id, nil
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
