// Package mounts reads and undoes the host's mounts from a pod that sees
// the host's root at Root: the mount table of the host's PID 1
// (Root/proc/1/mountinfo, the host's procfs mounted read-only), and
// umount through the host's systemd, which has a .mount unit for every
// mount it sees: stopping that unit unmounts it in the host's mount
// namespace. So the pod needs no capability (no CAP_SYS_ADMIN for umount,
// no CAP_SYS_PTRACE and CAP_SYS_CHROOT to enter the host's mount namespace)
// and the seccomp profile it runs under is the runtime's default. The
// pod's own copy of such a mount (the host's /run, mounted with
// HostToContainer propagation) goes with the host's.
package mounts

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// Units stops a systemd unit and waits for its job (installer/systemd's
// Conn).
type Units interface {
	Stop(ctx context.Context, name string) error
}

// Host is the host's mount namespace.
type Host struct {
	Root  string
	Units Units
	// Timeout bounds one unmount (the stop job); default 30s.
	Timeout time.Duration
}

// Under lists the host's mount points below dir, deepest last.
func (h Host) Under(dir string) ([]string, error) {
	return h.list(func(mp string) bool { return strings.HasPrefix(mp, dir+"/") })
}

func (h Host) list(keep func(mountPoint string) bool) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(h.Root, "proc/1/mountinfo"))
	if err != nil {
		return nil, err
	}
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		if mp := namespaces.UnescapeMountinfo(f[4]); keep(mp) {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// UnitName is systemd's name of the mount unit of the host's path p
// (systemd-escape --path --suffix=mount).
func UnitName(p string) string { return unit.UnitNamePathEscape(p) + ".mount" }

// Unmount unmounts the host's path p: systemd stops its mount unit. It
// succeeds once p is no longer in the host's mount table, whatever the
// stop said (a mount gone meanwhile has no unit left to stop).
func (h Host) Unmount(p string) error {
	if h.Units == nil {
		return fmt.Errorf("umount %s: no systemd to ask", p)
	}
	timeout := h.Timeout
	if timeout <= 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	stopErr := h.Units.Stop(ctx, UnitName(p))
	left, err := h.list(func(mp string) bool { return mp == p })
	if err != nil {
		return fmt.Errorf("umount %s: read the host's mounts: %w", p, err)
	}
	if slices.Contains(left, p) {
		return fmt.Errorf("umount %s: still mounted after systemd stopped %s: %v", p, UnitName(p), stopErr)
	}
	return nil
}
