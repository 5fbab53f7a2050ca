package cluster

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// cgroupRoot is a cgroup made for one kubelet (its cgroupRoot): the same
// path in every hierarchy, so that everything the kubelet and the runtime
// create for pods sits below it and goes with it.
type cgroupRoot struct {
	Name string   // e.g. "/nstarget-e2e-3f2a1c"
	dirs []string // Name in every cgroup mount: what remove and left cover
}

// cgroupMounts are the mount points of the cgroup hierarchies listed in
// mounts (/proc/self/mounts): v1 (type cgroup) and v2 (cgroup2).
type cgroupMounts struct{ v1, v2 []string }

func parseCgroupMounts(mounts io.Reader) (cgroupMounts, error) {
	var m cgroupMounts
	s := bufio.NewScanner(mounts)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 3 {
			continue
		}
		switch fields[2] {
		case "cgroup":
			m.v1 = append(m.v1, fields[1])
		case "cgroup2":
			m.v2 = append(m.v2, fields[1])
		}
	}
	return m, s.Err()
}

func readCgroupMounts() (cgroupMounts, error) {
	f, err := os.Open("/proc/self/mounts")
	if err != nil {
		return cgroupMounts{}, err
	}
	defer f.Close()
	return parseCgroupMounts(f)
}

// CgroupMounts lists the mount points of every cgroup hierarchy, v1 and v2.
func CgroupMounts() ([]string, error) {
	m, err := readCgroupMounts()
	return m.all(), err
}

// all is every mount point, v1 then v2.
func (m cgroupMounts) all() []string { return append(append([]string(nil), m.v1...), m.v2...) }

// forKubelet lists where the kubelet's cgroup root must exist before it
// starts: the v1 hierarchies, or the cgroup2 mount when there is no v1
// hierarchy. A hybrid host's cgroup2 ("unified") mount holds no
// controllers and the kubelet uses v1 there, but its cgroupfs manager still
// makes its cgroups in that mount too: remove and left cover all of them.
func (m cgroupMounts) forKubelet() ([]string, error) {
	switch {
	case len(m.v1) > 0:
		return m.v1, nil
	case len(m.v2) > 0:
		return m.v2[:1], nil
	}
	return nil, errors.New("no cgroup hierarchy mounted")
}

// makeCgroupRoot creates name where the kubelet needs it. A new v1 cpuset
// cgroup has no CPUs or memory nodes, so its parent's are copied in; on
// cgroup2 the controllers the kubelet needs are enabled for its children.
func makeCgroupRoot(name string) (_ *cgroupRoot, retErr error) {
	m, err := readCgroupMounts()
	if err != nil {
		return nil, err
	}
	hs, err := m.forKubelet()
	if err != nil {
		return nil, err
	}
	cg := &cgroupRoot{Name: name}
	for _, h := range m.all() {
		cg.dirs = append(cg.dirs, filepath.Join(h, name))
	}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, cg.remove())
		}
	}()
	for _, h := range hs {
		dir := filepath.Join(h, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			return cg, fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(h, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil && !errors.Is(err, fs.ErrNotExist) {
					return cg, fmt.Errorf("cgroup %s: %s: %w", dir, f, err)
				}
			}
		}
		if ctl, err := os.ReadFile(filepath.Join(h, "cgroup.subtree_control")); err == nil {
			var enable []string
			for _, c := range strings.Fields(string(ctl)) {
				enable = append(enable, "+"+c)
			}
			if len(enable) > 0 {
				if err := os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte(strings.Join(enable, " ")), 0o644); err != nil {
					return cg, fmt.Errorf("cgroup %s: enable controllers: %w", dir, err)
				}
			}
		}
	}
	return cg, nil
}

// remove removes the cgroup and every cgroup below it, deepest first, in
// every hierarchy, whoever made them. A cgroup that still has processes
// cannot be removed; it is retried for a few seconds (a killed process
// leaves its cgroup late) and then reported.
func (cg *cgroupRoot) remove() error {
	var errs []error
	for _, dir := range cg.dirs {
		var err error
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(200 * time.Millisecond) {
			if err = removeTree(dir); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// removeTree removes the cgroup directory dir and all below it.
func removeTree(dir string) error {
	var dirs []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	var errs []error
	for _, d := range dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// left lists the directories of the cgroup that still exist.
func (cg *cgroupRoot) left() []string {
	var left []string
	for _, dir := range cg.dirs {
		if _, err := os.Stat(dir); err == nil {
			left = append(left, dir)
		}
	}
	return left
}
