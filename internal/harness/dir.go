package harness

import (
	"fmt"
	"os"
	"path/filepath"
)

// DirMode is the mode of containerd's directory (Options.Dir) and of every
// directory above it that the harness or its callers create: anyone may
// traverse it, only root may list it.
//
// A container in a user namespace (CRI UsernsOptions, critest's
// "UserNamespaces ... NamespaceMode_POD") is set up by runc from inside that
// namespace, as a root that is an unprivileged uid on the host and has no
// capability over the host root's files. It must be able to walk down to its
// rootfs, Dir/state/io.containerd.runtime.v2.task/NS/ID/rootfs; a 0700
// directory on the way makes runc fail with "remount-propagation
// dst=.../rootfs, flags=MS_PRIVATE: permission denied". containerd creates
// its own state directories 0711 for the same reason.
const DirMode os.FileMode = 0o711

// TempDir is os.MkdirTemp("/tmp", prefix) with mode DirMode, for a tree
// that will hold a containerd directory.
func TempDir(prefix string) (string, error) {
	dir, err := os.MkdirTemp("/tmp", prefix)
	if err != nil {
		return "", err
	}
	if err := os.Chmod(dir, DirMode); err != nil {
		return "", fmt.Errorf("chmod %s: %w", dir, err)
	}
	return dir, nil
}

// prepareDir creates containerd's directory dir (absolute) if needed, gives
// it mode DirMode and checks that every directory above it can be traversed
// by anyone (see DirMode). It changes nothing above dir: those are the
// caller's.
func prepareDir(dir string) error {
	if err := os.MkdirAll(dir, DirMode); err != nil {
		return fmt.Errorf("create containerd dir: %w", err)
	}
	if err := os.Chmod(dir, DirMode); err != nil {
		return fmt.Errorf("containerd dir: %w", err)
	}
	return checkTraversable(filepath.Dir(dir), dir)
}

// checkTraversable fails unless p and each directory above it has the
// search bit for others set.
func checkTraversable(p, dir string) error {
	for {
		fi, err := os.Stat(p)
		if err != nil {
			return fmt.Errorf("containerd dir %s: %w", dir, err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("containerd dir %s: %s (mode %#o) is not traversable by others, so containers in a user namespace could not reach their rootfs below it: create it with mode harness.DirMode (%#o), e.g. with harness.TempDir",
				dir, p, fi.Mode().Perm(), DirMode)
		}
		parent := filepath.Dir(p)
		if parent == p {
			return nil
		}
		p = parent
	}
}
