package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// residueLockPath is flocked shared by every running Containerd of this
// package and exclusively by one that cleans up the host residue. It is a
// directory that always exists, so the lock itself leaves nothing behind.
const residueLockPath = "/tmp"

// residue are the host paths that containerd 1.6 and runc create outside
// Dir whatever the config says, and leave behind, empty: the shim socket
// dir and the parent cgroup of every CRI container ("/k8s.io/<id>").
func residue() []string {
	cgroups, _ := filepath.Glob("/sys/fs/cgroup/*/k8s.io")
	return append([]string{shimSocketDir, filepath.Dir(shimSocketDir)}, cgroups...)
}

// lockHost takes the shared residue lock; it blocks only while another
// Containerd is cleaning up.
func lockHost() (*os.File, error) {
	f, err := os.Open(residueLockPath)
	if err != nil {
		return nil, fmt.Errorf("open residue lock %s: %w", residueLockPath, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s shared: %w", residueLockPath, err)
	}
	return f, nil
}

// unlockHost drops the residue lock; if no other Containerd holds it, it
// first removes the residue that is empty (rmdir fails on a non-empty dir
// or a cgroup still in use, which is left alone).
func unlockHost(f *os.File) error {
	if f == nil {
		return nil
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		return nil // another Containerd still runs: the residue is in use
	}
	var errs []error
	for _, p := range residue() {
		err := unix.Rmdir(p)
		if err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTEMPTY) &&
			!errors.Is(err, unix.EEXIST) && !errors.Is(err, unix.EBUSY) {
			errs = append(errs, fmt.Errorf("remove %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}
