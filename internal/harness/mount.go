package harness

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// MountsUnder returns the mount points at or below dir, deepest first.
func MountsUnder(dir string) ([]string, error) { return mountsUnderIn("/proc/self/mountinfo", dir) }

// MountsUnderOf returns the mount points at or below dir in the mount
// namespace of process pid, deepest first.
func MountsUnderOf(pid int, dir string) ([]string, error) {
	return mountsUnderIn(fmt.Sprintf("/proc/%d/mountinfo", pid), dir)
}

func mountsUnderIn(mountinfo, dir string) ([]string, error) {
	f, err := os.Open(mountinfo)
	if err != nil {
		return nil, fmt.Errorf("open mountinfo: %w", err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024) // overlay options can be long
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		mp := namespaces.UnescapeMountinfo(fields[4])
		if mp == dir || strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read mountinfo: %w", err)
	}
	// Deepest first; among equals, the later (upper) mount first.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	sort.SliceStable(out, func(i, j int) bool {
		return strings.Count(out[i], "/") > strings.Count(out[j], "/")
	})
	return out, nil
}

// UnmountAll unmounts everything at or below dir, deepest first, detaching
// what is busy; it repeats for stacked mounts until none is left.
func UnmountAll(dir string) error {
	resolved, err := filepath.EvalSymlinks(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("resolve %s: %w", dir, err)
	}
	for attempt := 0; attempt < 5; attempt++ {
		mounts, err := MountsUnder(resolved)
		if err != nil || len(mounts) == 0 {
			return err
		}
		for _, mp := range mounts {
			if err := unmount(mp); err != nil {
				return err
			}
		}
	}
	if left, err := MountsUnder(resolved); err != nil || len(left) > 0 {
		return errors.Join(err, fmt.Errorf("mounts left under %s: %v", resolved, left))
	}
	return nil
}

func unmount(mp string) error {
	err := unix.Unmount(mp, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(mp, unix.MNT_DETACH)
	}
	if err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("unmount %s: %w", mp, err)
	}
	return nil
}
