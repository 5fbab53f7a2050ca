package namespaces

import (
	"errors"
	"fmt"
	"os"
)

// Kind is a namespace type, named as in /proc/<pid>/ns and in the OCI
// runtime spec ("pid", "ipc").
type Kind string

// The kinds cri-nstarget can target.
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

// Handle is an open namespace file, held so that the namespace it refers to
// stays the one that was verified, whatever happens to the process.
type Handle struct {
	Kind Kind
	ID   ID
	file *os.File
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
