package namespaces

import (
	"errors"
	"fmt"
	"os"
)

// Kind is a namespace type, named as in /proc/<pid>/ns and in the OCI
// runtime spec ("pid", "ipc").
type Kind string

// The kinds cri-nstarget can target, and Shm.
const (
	PID Kind = "pid"
	IPC Kind = "ipc"
)

// ID identifies a namespace: two nsfs files refer to the same namespace
// exactly when their device and inode numbers are equal.
type ID struct {
	Dev uint64 `json:"dev"`
	Ino uint64 `json:"inode"`
}

// String renders the ID the way /proc/<pid>/ns links show the inode part.
func (id ID) String() string { return fmt.Sprintf("[%d]", id.Ino) }

// Shm is not a namespace: it is a process's /dev/shm, where POSIX shared
// memory lives. It is a mount, so sharing an IPC namespace does not share it;
// Open and Pin hold it as they hold namespaces, so that sharing "everything
// IPC means" cannot be swapped by PID reuse either.
const Shm Kind = "shm"

// mountRef locates a directory by the mount it is on, as
// /proc/<pid>/mountinfo describes it: the filesystem (device) and the path
// of the directory inside that filesystem.
type mountRef struct {
	dev  string // "major:minor"
	path string // inside the filesystem, e.g. "/" or "/pods/x/volumes/shm"
}

// Handle is an open namespace file, held so that the namespace it refers to
// stays the one that was verified, whatever happens to the process.
type Handle struct {
	Kind Kind
	ID   ID
	file *os.File
	shm  *mountRef // Kind Shm: where the directory is mounted from
}

// Close releases the handle.
func (h *Handle) Close() error {
	if h.file == nil {
		return nil
	}
	return h.file.Close()
}

// ErrExited is returned by Open when the process exited (or its PID was never
// that of a live process) while its namespaces were being opened.
var ErrExited = errors.New("process exited")
