// Package hostfs resolves the host's paths under the directory where a pod
// sees the host's root (its hostPath mount of /). Symbolic links are
// followed as the host would follow them: an absolute one (/var/run ->
// /run) from the host's root, not the pod's, which is where the kernel
// would take it when opened through the mount.
package hostfs

import (
	"os"
	"path"
	"path/filepath"
	"strings"
)

// maxLinks bounds the links followed in one path, as the kernel's 40.
const maxLinks = 40

// Path is the host's path p (absolute) as seen under root: each existing
// symbolic link on the way resolved within root. The part of p from the
// first missing component on is appended as it is.
func Path(root, p string) string {
	rest := strings.Split(p, "/")
	cur := "/" // resolved so far, a host path
	links := 0
	for len(rest) > 0 {
		c := rest[0]
		rest = rest[1:]
		if c == "" || c == "." {
			continue
		}
		if c == ".." {
			cur = path.Dir(cur)
			continue
		}
		next := path.Join(cur, c)
		fi, err := os.Lstat(filepath.Join(root, next))
		if err != nil {
			return filepath.Join(root, next, path.Join(rest...))
		}
		if fi.Mode()&os.ModeSymlink == 0 {
			cur = next
			continue
		}
		links++
		target, err := os.Readlink(filepath.Join(root, next))
		if err != nil || links > maxLinks {
			return filepath.Join(root, next, path.Join(rest...))
		}
		if path.IsAbs(target) {
			cur = "/"
		}
		rest = append(strings.Split(target, "/"), rest...)
	}
	return filepath.Join(root, cur)
}
