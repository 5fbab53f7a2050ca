package harness

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// shimSocketDir is where containerd 1.6 shims put their sockets, whatever
// containerd's own state dir is (runtime/v2/shim.SocketAddress).
const shimSocketDir = "/run/containerd/s"

// Proc identifies a process across PID reuse: its PID and its start time
// in clock ticks since boot.
type Proc struct {
	PID   int
	Start uint64
}

// procStat is the part of /proc/PID/stat this package reads.
type procStat struct {
	state byte
	ppid  int
	start uint64
}

// readStat parses /proc/PID/stat; comm may hold spaces and parentheses,
// so the fields are counted after its last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procStat{}, fmt.Errorf("read stat of %d: %w", pid, err)
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("parse stat of %d: no comm in %q", pid, b)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3 (state), f[19] field 22 (starttime).
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("parse stat of %d: %q", pid, b)
	}
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		return procStat{}, fmt.Errorf("parse ppid of %d: %w", pid, err)
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("parse start time of %d: %w", pid, err)
	}
	return procStat{state: f[0][0], ppid: ppid, start: start}, nil
}

// procOf returns the Proc of a running pid.
func procOf(pid int) (Proc, error) {
	st, err := readStat(pid)
	if err != nil {
		return Proc{}, err
	}
	return Proc{PID: pid, Start: st.start}, nil
}

// Alive reports whether p still runs: same PID, same start time, not a zombie.
func (p Proc) Alive() bool {
	st, err := readStat(p.PID)
	return err == nil && st.start == p.Start && st.state != 'Z' && st.state != 'X'
}

// pids lists the numeric entries of /proc.
func pids() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list /proc: %w", err)
	}
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// shim is a containerd shim process and the arguments that name its socket.
type shim struct {
	proc      Proc
	namespace string
	id        string
	address   string
}

// findShims returns the running shims whose -address is address.
func findShims(address string) ([]shim, error) {
	all, err := pids()
	if err != nil {
		return nil, err
	}
	var out []shim
	for _, pid := range all {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil || len(b) == 0 {
			continue // gone, or a kernel thread
		}
		s, ok := parseShim(strings.Split(strings.TrimRight(string(b), "\x00"), "\x00"))
		if !ok || s.address != address {
			continue
		}
		if s.proc, err = procOf(pid); err == nil {
			out = append(out, s)
		}
	}
	return out, nil
}

// parseShim recognises "containerd-shim-* -namespace NS -id ID -address ADDR ...".
func parseShim(args []string) (shim, bool) {
	if len(args) == 0 || !strings.HasPrefix(filepath.Base(args[0]), "containerd-shim") {
		return shim{}, false
	}
	var s shim
	for i := 1; i+1 < len(args); i++ {
		switch strings.TrimLeft(args[i], "-") {
		case "namespace":
			s.namespace = args[i+1]
		case "id":
			s.id = args[i+1]
		case "address":
			s.address = args[i+1]
		}
	}
	return s, s.address != ""
}

// socket is the path of the shim's socket (containerd 1.6's shim.SocketAddress).
func (s shim) socket() string {
	d := sha256.Sum256([]byte(filepath.Join(s.address, s.namespace, s.id)))
	return filepath.Join(shimSocketDir, fmt.Sprintf("%x", d))
}

// descendants returns every live process below roots, roots excluded.
func descendants(roots []int) ([]Proc, error) {
	all, err := pids()
	if err != nil {
		return nil, err
	}
	children := map[int][]int{}
	for _, pid := range all {
		if st, err := readStat(pid); err == nil {
			children[st.ppid] = append(children[st.ppid], pid)
		}
	}
	var out []Proc
	queue := append([]int(nil), roots...)
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		for _, c := range children[pid] {
			if p, err := procOf(c); err == nil {
				out = append(out, p)
			}
			queue = append(queue, c)
		}
	}
	return out, nil
}

// killProcs sends SIGKILL to every live proc and waits up to timeout for
// them to die (or turn zombie).
func killProcs(procs []Proc, timeout time.Duration) error {
	for _, p := range procs {
		if p.Alive() {
			if err := syscall.Kill(p.PID, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
				return fmt.Errorf("kill %d: %w", p.PID, err)
			}
		}
	}
	deadline := time.Now().Add(timeout)
	for _, p := range procs {
		for p.Alive() {
			if time.Now().After(deadline) {
				return fmt.Errorf("process %d still alive %s after SIGKILL", p.PID, timeout)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// killShims kills the shims of the containerd at address, and everything
// below them, by PID; it then removes the sockets the shims left behind.
func killShims(address string) error {
	shims, err := findShims(address)
	if err != nil || len(shims) == 0 {
		return err
	}
	roots := make([]int, 0, len(shims))
	procs := make([]Proc, 0, len(shims))
	for _, s := range shims {
		roots = append(roots, s.proc.PID)
		procs = append(procs, s.proc)
	}
	below, err := descendants(roots)
	if err != nil {
		return err
	}
	if err := killProcs(append(below, procs...), 10*time.Second); err != nil {
		return fmt.Errorf("kill shims of %s: %w", address, err)
	}
	for _, s := range shims {
		if err := os.Remove(s.socket()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove shim socket: %w", err)
		}
	}
	return nil
}
