package namespaces

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"
)

// Identity is what /proc says of a process, read while a pidfd holds it
// (OpenIdentified): enough for a caller that knows which container the
// process should be the init of to tell whether it is.
type Identity struct {
	// Cgroups are the paths of /proc/<pid>/cgroup's lines, one per
	// hierarchy (cgroup v1) or one (v2), as this process's cgroup namespace
	// sees them.
	Cgroups []string
	// NSpid is the process's pid in each PID namespace it is in, from that
	// of /proc's mount to its own innermost (/proc/<pid>/status); nil when
	// the kernel tells none (before 4.1).
	NSpid []int
	// InitTold: the kernel told, through the process's PID namespace as it
	// was opened, whether the process is that namespace's init (IsInit):
	// the namespace's pid 1 in ours is the process's pid, or not
	// (NS_GET_TGID_FROM_PIDNS, Linux 6.10+). /proc/<pid>/status is then not
	// read, and NSpid is nil.
	InitTold, IsInit bool
}

// Init tells whether the process is the init (pid 1) of its innermost PID
// namespace; known is false when the kernel did not tell.
func (id Identity) Init() (init, known bool) {
	if id.InitTold {
		return id.IsInit, true
	}
	if len(id.NSpid) == 0 {
		return false, false
	}
	return id.NSpid[len(id.NSpid)-1] == 1, true
}

// parseCgroupPaths is the path of each line of a /proc/<pid>/cgroup
// ("hierarchy-ID:controller-list:cgroup-path"; the path may hold colons).
func parseCgroupPaths(data string) ([]string, error) {
	var paths []string
	for _, line := range strings.Split(strings.TrimRight(data, "\n"), "\n") {
		if line == "" {
			continue
		}
		parts := strings.SplitN(line, ":", 3)
		if len(parts) != 3 || !strings.HasPrefix(parts[2], "/") {
			return nil, fmt.Errorf("cgroup line %q: want hierarchy-ID:controllers:/path", line)
		}
		paths = append(paths, parts[2])
	}
	return paths, nil
}

// parseNSpid is the NSpid field of a /proc/<pid>/status, nil when it has
// none.
func parseNSpid(data string) ([]int, error) {
	sc := bufio.NewScanner(strings.NewReader(data))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "NSpid:")
		if !ok {
			continue
		}
		fields := strings.Fields(rest)
		if len(fields) == 0 {
			return nil, fmt.Errorf("status line NSpid:%s: no pid", rest)
		}
		pids := make([]int, len(fields))
		for i, f := range fields {
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 {
				return nil, fmt.Errorf("status line NSpid:%s: %q is no pid", rest, f)
			}
			pids[i] = n
		}
		return pids, nil
	}
	return nil, sc.Err()
}
