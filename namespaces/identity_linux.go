package namespaces

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// identityOf reads process pid's Identity from /proc; a process gone
// meanwhile is ErrExited.
func identityOf(pid int) (Identity, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	cg, err := readProc(dir + "/cgroup")
	if err != nil {
		return Identity{}, err
	}
	st, err := readProc(dir + "/status")
	if err != nil {
		return Identity{}, err
	}
	var id Identity
	if id.Cgroups, err = parseCgroupPaths(cg); err != nil {
		return Identity{}, fmt.Errorf("%s/cgroup: %w", dir, err)
	}
	if id.NSpid, err = parseNSpid(st); err != nil {
		return Identity{}, fmt.Errorf("%s/status: %w", dir, err)
	}
	return id, nil
}

func readProc(path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ESRCH) {
			return "", fmt.Errorf("read %s: %w", path, ErrExited)
		}
		return "", err
	}
	return string(b), nil
}
