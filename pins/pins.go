package pins

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// Dir is the pins under one directory.
type Dir struct {
	dir string
	// via prefixes the paths answered for others to open (Paths, Add):
	// "" for the pins' own path, or the root of the process that holds
	// them, /proc/<pid>/root (Through).
	via string
}

// New is the pin store under dir (made when the first pin is), whose pins
// are named by their own path: they are mounts of the host's mount
// namespace, seen by the runtime as they are here (the proxy's).
func New(dir string) Dir { return Dir{dir: dir} }

// Through is the pin store under dir (an absolute path), whose pins are
// mounts of this process's own mount namespace, and named for others
// (Paths, Add) through the root of process pid, this one as the host sees
// it: /proc/<pid>/root<dir>/<id>/<kind>. runc on the host opens that path
// through this process's mount namespace, in which alone the pin exists:
// it lives as long as this process, and once the process is gone the path
// names nothing (a process reusing pid would need that very path in its
// root). Reachable checks that the name reaches dir.
func Through(dir string, pid int) Dir { return Dir{dir: dir, via: procRoot(pid)} }

// procRoot is the root of process pid, as /proc shows it.
func procRoot(pid int) string { return "/proc/" + strconv.Itoa(pid) + "/root" }

// Reachable says whether dir, made if missing, is reached through the
// root of process pid (Through's names): /proc/<pid>/root<dir> must be dir
// itself, the same device and inode. It is not when pid is not this
// process's pid in the PID namespace of the /proc it reads (not the
// host's: a pod without hostPID whose /proc is the host's), or /proc is
// not mounted.
func Reachable(dir string, pid int) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("pins directory: %w", err)
	}
	return sameDir(dir, procRoot(pid)+dir, pid)
}

// sameDir checks that named, the name of dir through the root of pid, is
// dir.
func sameDir(dir, named string, pid int) error {
	here, err := namespaces.Stat(dir)
	if err != nil {
		return fmt.Errorf("pins directory: %w", err)
	}
	there, err := namespaces.Stat(named)
	if err != nil {
		return fmt.Errorf("the pins directory %s through the root of pid %d, this process's: %w", dir, pid, err)
	}
	if here != there {
		return fmt.Errorf("%s is not the pins directory %s (device and inode %v, want %v): pid %d is not this process in the PID namespace of /proc, so the runtime could not open its pins by that name", named, dir, there, here, pid)
	}
	return nil
}

// throughRoot matches a name Through gives: the pid whose root it goes
// through, and the path in that root.
var throughRoot = regexp.MustCompile(`^/proc/([1-9][0-9]*)/root(/.*)$`)

// Owner tells, of a namespace path that a container's spec names, whether
// it is a pin of this store's directory named through the root of some
// process (Through's names): that process's pid, and the container the pin
// was made for.
func (p Dir) Owner(path string) (pid int, id string, ok bool) {
	m := throughRoot.FindStringSubmatch(path)
	if m == nil {
		return 0, "", false
	}
	rest, found := strings.CutPrefix(m[2], p.dir+"/")
	if !found {
		return 0, "", false
	}
	id, _, _ = strings.Cut(rest, "/")
	pid, err := strconv.Atoi(m[1])
	if err != nil || ValidateID(id) != nil {
		return 0, "", false
	}
	return pid, id, true
}

// containerDir is the pin directory of container id. Ids come from clients
// (StartContainer, RemoveContainer): one that is not a well-formed container
// id has no directory, so no request can reach a path outside dir.
func (p Dir) containerDir(id string) (string, bool) {
	if ValidateID(id) != nil {
		return "", false
	}
	return filepath.Join(p.dir, id), true
}

// Paths are where Hold pins hs for container id, as others name them (a
// spec, for the runtime to open).
func (p Dir) Paths(id string, hs []*namespaces.Handle) (map[namespaces.Kind]string, error) {
	paths, err := p.at(id, hs)
	for k, path := range paths {
		paths[k] = p.via + path
	}
	return paths, err
}

// at are the paths where Hold pins hs for container id, as this process
// opens them.
func (p Dir) at(id string, hs []*namespaces.Handle) (map[namespaces.Kind]string, error) {
	d, ok := p.containerDir(id)
	if !ok {
		return nil, fmt.Errorf("pin namespaces of %q: not a container id", id)
	}
	paths := make(map[namespaces.Kind]string, len(hs))
	for _, h := range hs {
		paths[h.Kind] = filepath.Join(d, string(h.Kind))
	}
	return paths, nil
}

// Hold pins each handle for container id, at its path in Paths. On error,
// nothing stays pinned for id.
func (p Dir) Hold(id string, hs []*namespaces.Handle) error {
	paths, err := p.at(id, hs)
	if err != nil {
		return err
	}
	for _, h := range hs {
		if err := namespaces.Pin(h, paths[h.Kind]); err != nil {
			return errors.Join(err, p.Release(id))
		}
	}
	return nil
}

// Add pins one more handle for container id, at its path in Paths, and
// returns that path (as Paths names it). On error nothing of h stays
// pinned; the other pins of id are left alone.
func (p Dir) Add(id string, h *namespaces.Handle) (string, error) {
	paths, err := p.at(id, []*namespaces.Handle{h})
	if err != nil {
		return "", err
	}
	if err := namespaces.Pin(h, paths[h.Kind]); err != nil {
		return "", err
	}
	return p.via + paths[h.Kind], nil
}

// Path returns the pin of kind for container id, if there is one, as this
// process opens it.
func (p Dir) Path(id string, kind namespaces.Kind) (string, bool) {
	d, ok := p.containerDir(id)
	if !ok {
		return "", false
	}
	path := filepath.Join(d, string(kind))
	if _, err := os.Lstat(path); err != nil {
		return "", false
	}
	return path, true
}

// Release unpins everything held for container id.
func (p Dir) Release(id string) error {
	d, ok := p.containerDir(id)
	if !ok {
		return nil
	}
	entries, err := os.ReadDir(d)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release pins of %q: %w", id, err)
	}
	var errs []error
	for _, e := range entries {
		errs = append(errs, namespaces.Unpin(filepath.Join(d, e.Name())))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("release pins of %q: %w", id, err)
	}
	if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("release pins of %q: %w", id, err)
	}
	return nil
}

// IDs lists the containers that hold pins.
func (p Dir) IDs() ([]string, error) {
	entries, err := os.ReadDir(p.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list pins: %w", err)
	}
	ids := make([]string, 0, len(entries))
	for _, e := range entries {
		if e.IsDir() {
			ids = append(ids, e.Name())
		}
	}
	return ids, nil
}

// MaxIDLen bounds an id. containerd ids are 64 hex digits; any CRI
// runtime's ids fit well within this.
const MaxIDLen = 128

// ValidateID accepts a container id, or a unique prefix of one: ASCII
// letters and digits, with '.', '_' and '-' between them. Paths, "..", NUL,
// non-ASCII bytes and absurd lengths are refused, so no id names a path
// outside the pin directory.
func ValidateID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("the id is empty")
	case len(id) > MaxIDLen:
		return fmt.Errorf("%q is %d bytes long; at most %d allowed", clip(id), len(id), MaxIDLen)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if isAlnum(c) || (c == '.' || c == '_' || c == '-') && i > 0 && i < len(id)-1 && isAlnum(id[i-1]) {
			continue
		}
		return fmt.Errorf("%q has %q at byte %d; a container id is ASCII letters and digits, with single '.', '_' or '-' between them", clip(id), c, i)
	}
	return nil
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) <= 80 {
		return s
	}
	return s[:80] + "..."
}
