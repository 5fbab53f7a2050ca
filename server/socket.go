package server

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// SocketPath is the file of a unix endpoint, given as "unix:///path" or, as
// crictl and containerd take it, a bare "/path". Anything else is an error.
func SocketPath(endpoint string) (string, error) {
	path, _ := strings.CutPrefix(endpoint, "unix://")
	if !filepath.IsAbs(path) {
		return "", fmt.Errorf("%q: want unix:///absolute/path or /absolute/path", endpoint)
	}
	return filepath.Clean(path), nil
}

// Listen opens the CRI socket at endpoint, mode 0660, owned by the caller and
// by group (a name or a gid) when given. The directories it creates for the
// socket are 0755 without a group (less under a stricter umask, such as the
// unit's 0077) and 0750, owned by the group, with one, whatever the umask, so
// that the group's members reach the socket; a directory that exists is left
// as it is (its mode is its owner's choice). A socket file left by a crashed
// predecessor is replaced; a socket someone still serves on, or a file that
// is not a socket, is an error. It returns the listener and the socket's
// path, which the caller removes when it stops.
func Listen(endpoint, group string) (net.Listener, string, error) {
	path, err := SocketPath(endpoint)
	if err != nil {
		return nil, "", fmt.Errorf("listen: %w", err)
	}
	gid, err := lookupGroup(group)
	if err != nil {
		return nil, "", fmt.Errorf("socket group %q: %w", group, err)
	}
	if err := makeSocketDir(filepath.Dir(path), gid); err != nil {
		return nil, "", fmt.Errorf("listen %s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, "", fmt.Errorf("listen %s: exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, "", fmt.Errorf("listen %s: another process serves this socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, "", fmt.Errorf("listen %s: remove stale socket: %w", path, err)
		}
	}
	old := syscall.Umask(0o117) // the socket is never, even briefly, open to others
	lis, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, "", fmt.Errorf("listen %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		lis.Close()
		return nil, "", fmt.Errorf("listen %s: %w", path, err)
	}
	if gid >= 0 {
		if err := os.Chown(path, -1, gid); err != nil {
			lis.Close()
			return nil, "", fmt.Errorf("listen %s: give it to group %s (needs CAP_CHOWN, or membership of the group): %w", path, group, err)
		}
	}
	return lis, path, nil
}

// makeSocketDir creates dir and its missing parents. Without a group (gid
// -1) they are 0755 less the umask. With one, each directory it creates is
// made 0700, given to the group, then opened to it (0750), so that it is
// never open to anyone else on the way, nor left made when that fails.
// Directories that exist are not touched.
func makeSocketDir(dir string, gid int) (retErr error) {
	if gid < 0 {
		return os.MkdirAll(dir, 0o755)
	}
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if err := makeSocketDir(filepath.Dir(dir), gid); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil // made meanwhile by someone else: theirs
		}
		return err
	}
	defer func() {
		if retErr != nil {
			os.Remove(dir)
		}
	}()
	if err := os.Chown(dir, -1, gid); err != nil {
		return fmt.Errorf("give directory %s to group %d (needs CAP_CHOWN, or membership of the group): %w", dir, gid, err)
	}
	return os.Chmod(dir, 0o750)
}

// lookupGroup resolves a group name or number; "" is -1 (none).
func lookupGroup(group string) (int, error) {
	if group == "" {
		return -1, nil
	}
	if gid, err := strconv.Atoi(group); err == nil && gid >= 0 {
		return gid, nil
	}
	g, err := user.LookupGroup(group)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(g.Gid)
}
