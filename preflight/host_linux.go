package preflight

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// kernelRelease is uname -r.
func kernelRelease() (string, error) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "", fmt.Errorf("uname: %w", err)
	}
	return unix.ByteSliceToString(u.Release[:]), nil
}

// pidfdSelf opens a pidfd of this process, as the shim opens its targets'.
func pidfdSelf() error {
	fd, err := unix.PidfdOpen(os.Getpid(), 0)
	if err != nil {
		return err
	}
	return unix.Close(fd)
}

// cgroup2 says whether dir ("/sys/fs/cgroup") is the cgroup v2 hierarchy.
func cgroup2(dir string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	return st.Type == unix.CGROUP2_SUPER_MAGIC, nil
}
