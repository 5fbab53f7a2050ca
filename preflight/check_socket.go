package preflight

import (
	"fmt"

	conf "github.com/cri-nstarget/cri-nstarget/config"
)

// Socket: the listen socket's directories, and with socket_group, that the
// group's members can reach the socket through them (the shim makes the
// missing ones 0750 and gives them to the group; one that exists it leaves
// as it is).
func Socket(cfg conf.Config, f Facts) Result {
	path := socketPath(cfg.Listen)
	if f.Group.GID < 0 {
		return Result{OK, fmt.Sprintf("listen %s: root only (no socket_group); %s", path, dirState(f.SocketDirs)), ""}
	}
	if f.Group.Err != nil {
		return Result{Fail, fmt.Sprintf("socket_group %q: %v", f.Group.Name, oneLine(f.Group.Err)),
			"create the group (groupadd " + f.Group.Name + "), or set socket_group to one that exists"}
	}
	for _, d := range f.SocketDirs {
		switch {
		case d.Err != nil:
			return Result{Warn, fmt.Sprintf("listen %s: directory %s: %v", path, d.Path, oneLine(d.Err)), "run the check as root"}
		case d.Missing:
			return Result{OK, fmt.Sprintf("listen %s, group %s (gid %d): the shim makes %s for the group (0750)", path, f.Group.Name, f.Group.GID, d.Path), ""}
		case !traversable(d, f.Group.GID):
			return Result{Fail, fmt.Sprintf("listen %s: members of group %s cannot reach it: directory %s is %s %d:%d", path, f.Group.Name, d.Path, d.Mode, d.UID, d.GID),
				fmt.Sprintf("chgrp %s %s && chmod 0750 %s, or remove it (rmdir %s) so that the shim makes it for the group", f.Group.Name, d.Path, d.Path, d.Path)}
		}
	}
	return Result{OK, fmt.Sprintf("listen %s, group %s (gid %d): its directories let the group through", path, f.Group.Name, f.Group.GID), ""}
}

// traversable says whether members of group gid may pass through d.
func traversable(d Dir, gid int) bool {
	return d.Mode&0o001 != 0 || d.GID == gid && d.Mode&0o010 != 0
}

// dirState says how the socket's own directory (the last of dirs) is.
func dirState(dirs []Dir) string {
	if len(dirs) == 0 {
		return "its directory unknown"
	}
	for _, d := range dirs {
		if d.Missing {
			return fmt.Sprintf("the shim makes %s", d.Path)
		}
		if d.Err != nil {
			return fmt.Sprintf("directory %s: %v", d.Path, oneLine(d.Err))
		}
	}
	d := dirs[len(dirs)-1]
	return fmt.Sprintf("its directory %s is %s %d:%d", d.Path, d.Mode, d.UID, d.GID)
}
