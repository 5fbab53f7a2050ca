package namespaces

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// openShm opens /proc/<pid>/root/dev/shm (O_PATH) and reads where it is
// mounted from. A process without a /dev/shm has no handle (nil, nil).
func openShm(pid int) (*Handle, error) {
	proc := filepath.Join("/proc", strconv.Itoa(pid))
	path := filepath.Join(proc, "root/dev/shm")
	f, err := os.OpenFile(path, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		if _, serr := os.Stat(proc); serr != nil || errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("open %s: %w", path, ErrExited)
		}
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
			return nil, nil
		}
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		f.Close()
		return nil, fmt.Errorf("fstat %s: %w", path, err)
	}
	info, err := os.ReadFile(filepath.Join(proc, "mountinfo"))
	if err != nil {
		f.Close()
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return nil, fmt.Errorf("read %s/mountinfo: %w", proc, ErrExited)
		}
		return nil, err
	}
	ref, ok := locate(info, "/dev/shm")
	if !ok {
		f.Close()
		return nil, fmt.Errorf("%s: no mount holds /dev/shm in %s/mountinfo", path, proc)
	}
	return &Handle{Kind: Shm, ID: ID{Dev: st.Dev, Ino: st.Ino}, file: f, shm: &ref}, nil
}

// locate finds, in a mountinfo, the mount that holds dir (the last mount at
// the longest mount point that is dir or a parent of it) and returns where
// dir is inside that mount's filesystem.
func locate(mountinfo []byte, dir string) (mountRef, bool) {
	var best mountRef
	bestLen := -1
	for _, m := range parseMountinfo(mountinfo) {
		rest, ok := under(dir, m.point)
		if !ok || len(m.point) < bestLen {
			continue
		}
		best, bestLen = mountRef{dev: m.dev, path: filepath.Join(m.root, rest)}, len(m.point)
	}
	return best, bestLen >= 0
}

// under reports whether path is dir or below it, and the rest of path.
func under(path, dir string) (string, bool) {
	if dir == "/" {
		return path, true
	}
	if path == dir {
		return "/", true
	}
	rest, ok := strings.CutPrefix(path, dir+"/")
	return "/" + rest, ok
}

type mountinfoEntry struct{ dev, root, point string }

// parseMountinfo reads the fields it needs of each line of a
// /proc/<pid>/mountinfo (proc(5)): major:minor, root, mount point.
func parseMountinfo(b []byte) []mountinfoEntry {
	var out []mountinfoEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		out = append(out, mountinfoEntry{dev: f[2], root: UnescapeMountinfo(f[3]), point: UnescapeMountinfo(f[4])})
	}
	return out
}

// hostPaths lists the paths, in this process's mount namespace, at which
// the directory ref names is reachable: below each mount of the same
// filesystem whose root holds it.
func hostPaths(mountinfo []byte, ref mountRef) []string {
	var out []string
	for _, m := range parseMountinfo(mountinfo) {
		if m.dev != ref.dev {
			continue
		}
		if rest, ok := under(ref.path, m.root); ok {
			out = append(out, filepath.Join(m.point, rest))
		}
	}
	return out
}

// pinShm bind-mounts the /dev/shm held by h onto the directory path. A
// mount cannot be bind-mounted out of another mount namespace, so the same
// directory is looked for among this process's mounts (same filesystem, same
// inode: what the target's container was given, e.g. the pod's tmpfs or an
// emptyDir); the pin is checked to be that directory once mounted.
func pinShm(h *Handle, path string) error {
	info, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return fmt.Errorf("pin shm: %w", err)
	}
	if err := os.Mkdir(path, 0o700); err != nil {
		return fmt.Errorf("pin shm: %w", err)
	}
	for _, src := range hostPaths(info, *h.shm) {
		var st unix.Stat_t
		if unix.Stat(src, &st) != nil || st.Dev != h.ID.Dev || st.Ino != h.ID.Ino {
			continue
		}
		if err := unix.Mount(src, path, "", unix.MS_BIND, ""); err != nil {
			os.Remove(path)
			return fmt.Errorf("pin shm: bind-mount %s onto %s: %w", src, path, err)
		}
		if unix.Stat(path, &st) == nil && st.Dev == h.ID.Dev && st.Ino == h.ID.Ino {
			return nil
		}
		unix.Unmount(path, unix.MNT_DETACH)
	}
	os.Remove(path)
	return fmt.Errorf("pin shm: the target's /dev/shm (device %s, %s) is not mounted in the shim's mount namespace", h.shm.dev, h.shm.path)
}
