package server

import (
	"context"
	"fmt"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// The confirmation that the process the target's namespaces were opened
// through is the target's init, without asking containerd (the plugin
// mode): the container's cgroups path, as NRI told it, names the
// container's id; the process the pidfd held while its namespaces were
// opened was then, by /proc, in a cgroup naming that id, and the init
// (pid 1) of its innermost PID namespace. Only the container's own init
// is both: another process of the container is not pid 1 of its PID
// namespace, and a process that took a reused pid is in another cgroup.
// When that cannot be told (no cgroups path known, one that does not name
// the id, a kernel without NSpid, or a process that is no PID namespace's
// init, as in a pod sharing its PID namespace), containerd's word decides,
// as in the proxy (confirmation).

// namesID tells whether the cgroup path names container id: as a whole
// component (cgroupfs: .../pod<uid>/<id>) or inside one, delimited by
// what is no hex digit (systemd: cri-containerd-<id>.scope; NRI's
// slice:cri-containerd:<id>).
func namesID(path, id string) bool {
	if id == "" {
		return false
	}
	for _, c := range strings.Split(path, "/") {
		for at := 0; ; {
			i := strings.Index(c[at:], id)
			if i < 0 {
				break
			}
			i += at
			end := i + len(id)
			if (i == 0 || !isHex(c[i-1])) && (end == len(c) || !isHex(c[end])) {
				return true
			}
			at = i + 1
		}
	}
	return false
}

func isHex(c byte) bool { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' }

// notTargetError: the process a pid names is not the target's init (why),
// as /proc tells it.
type notTargetError struct {
	pid uint32
	why string
}

func (e *notTargetError) Error() string {
	return fmt.Sprintf("verify pid %d: not the target's process: %s", e.pid, e.why)
}

// initOf is whether who, the process pid named while the target's
// namespaces were opened through it, is the init of container id:
// confirmed (nil, true), not it (a *notTargetError, true), or not to be
// told here (nil, false).
func initOf(id string, pid uint32, who namespaces.Identity) (error, bool) {
	named := false
	for _, p := range who.Cgroups {
		named = named || namesID(p, id)
	}
	if !named {
		return &notTargetError{pid: pid, why: fmt.Sprintf("its cgroups (%s) do not name container %s", strings.Join(who.Cgroups, ", "), id)}, true
	}
	if init, known := who.Init(); !known || !init {
		return nil, false
	}
	return nil, true
}

// openConfirmed opens the namespaces of kinds of the target (id) found as
// c, through its pid, and answers how that pid is confirmed as the
// target's: at once by /proc (initOf), when NRI told a cgroups path naming
// id, else by containerd's word, asked in the background on ctx
// (confirmation).
func (t *targeter) openConfirmed(ctx context.Context, id string, c found, kinds []namespaces.Kind) ([]*namespaces.Handle, func() error, error) {
	if !namesID(c.cgroups, id) {
		hs, err := t.openNS(int(c.pid), kinds)
		if err != nil {
			return nil, nil, err
		}
		return hs, t.confirmation(ctx, id, c.pid), nil
	}
	hs, who, err := t.openIdentified(int(c.pid), kinds)
	if err != nil {
		return nil, nil, err
	}
	verdict, told := initOf(id, c.pid, who)
	if !told {
		return hs, t.confirmation(ctx, id, c.pid), nil
	}
	if t.log.Logger.IsLevelEnabled(logrus.DebugLevel) {
		t.log.WithFields(logrus.Fields{"target": id, "pid": c.pid, "cgroups": who.Cgroups, "nspid": who.NSpid, "init_told_by_kernel": who.InitTold, "refused": verdict}).
			Debug(localConfirmedLog)
	}
	return hs, func() error { return verdict }, nil
}

// localConfirmedLog is the debug log's line for a pid told by /proc.
const localConfirmedLog = "the target's pid told by /proc, not asked of containerd"
