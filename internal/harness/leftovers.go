package harness

import (
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// KubeHostDirs are where a kubelet or a runtime writes by default, whatever
// a test's configuration says: the end-to-end suites (e2e/, e2e/upstream)
// list them before a run and check that the run added nothing there.
var KubeHostDirs = []string{"/etc", "/run", "/var/run", "/var/lib", "/var/log", "/usr/libexec", "/opt"}

// Entries is what a set of directories held: "dir/name" for each entry.
type Entries map[string]bool

// ListEntries lists the entries of dirs (a directory that cannot be read
// lists none).
func ListEntries(dirs []string) Entries {
	seen := Entries{}
	for _, d := range dirs {
		es, _ := os.ReadDir(d)
		for _, e := range es {
			seen[filepath.Join(d, e.Name())] = true
		}
	}
	return seen
}

// Added lists, sorted, the entries of after that before did not hold.
func (before Entries) Added(after Entries) []string {
	var added []string
	for p := range after {
		if !before[p] {
			added = append(added, p)
		}
	}
	sort.Strings(added)
	return added
}

// ProcessesNaming lists the processes (other than this one) whose command
// line names something under dir, as "pid: command line": every process a
// run starts does, so none may be left once it is torn down.
func ProcessesNaming(dir string) []string {
	var left []string
	cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, f := range cmdlines {
		b, err := os.ReadFile(f)
		pid := filepath.Base(filepath.Dir(f))
		if err != nil || pid == strconv.Itoa(os.Getpid()) || !strings.Contains(string(b), dir) {
			continue
		}
		left = append(left, pid+": "+strings.ReplaceAll(strings.TrimRight(string(b), "\x00"), "\x00", " "))
	}
	return left
}
