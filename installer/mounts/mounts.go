// Package mounts reads and undoes the host's mounts from a pod that sees
// the host's root at Root: the mount table of the host's PID 1
// (Root/proc/1/mountinfo), and umount(2) run in the host's mount namespace
// (Root/proc/1/ns/mnt), which the pod's own does not share. A mount that
// existed when the pod started was copied into the pod's namespace with
// the host's root: Unmount undoes that copy too, so that nothing of it is
// left mounted where the installer runs and the file under it can go.
package mounts

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// Host is the host's mount namespace.
type Host struct {
	Root string
}

// Under lists the host's mount points below dir, deepest last.
func (h Host) Under(dir string) ([]string, error) {
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
		mp := namespaces.UnescapeMountinfo(f[4])
		if strings.HasPrefix(mp, dir+"/") {
			out = append(out, mp)
		}
	}
	return out, sc.Err()
}

// Unmount unmounts the host's path p: its copy under Root in the pod's own
// mount namespace, if there is one, then p in the host's mount namespace,
// on an OS thread of its own, which leaves the process's file-system
// attributes (unshare(CLONE_FS), as setns(2) requires of a mount namespace)
// and is thrown away after (the goroutine ends locked to it).
func (h Host) Unmount(p string) error {
	if err := unix.Unmount(filepath.Join(h.Root, p), 0); err != nil && err != unix.EINVAL && err != unix.ENOENT {
		return fmt.Errorf("umount %s here: %w", filepath.Join(h.Root, p), err)
	}
	ns, err := os.Open(filepath.Join(h.Root, "proc/1/ns/mnt"))
	if err != nil {
		return err
	}
	defer ns.Close()
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := unix.Unshare(unix.CLONE_FS); err != nil {
			done <- fmt.Errorf("unshare(CLONE_FS): %w", err)
			return
		}
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNS); err != nil {
			done <- fmt.Errorf("enter the host's mount namespace: %w", err)
			return
		}
		if err := unix.Unmount(p, 0); err != nil {
			done <- fmt.Errorf("umount %s: %w", p, err)
			return
		}
		done <- nil
	}()
	return <-done
}
