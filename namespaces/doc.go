// Package namespaces holds the Linux namespace facts cri-nstarget relies on:
// the identity of a namespace (device and inode of its nsfs file), a
// pidfd-verified open of a process's namespaces and of its /dev/shm (where
// POSIX shared memory lives: a mount, not a namespace, held as one), pinning
// either by bind-mounting it onto a path, whether a PID namespace still has
// an init that new processes can join, and whether a container's user
// namespace may join a namespace at all (CanJoin: setns(2)'s rule).
//
// It knows nothing of gRPC or containerd: callers pass in process ids and
// paths. Open proves that what it opened belongs to one live process; that
// the process is the one meant is the caller's to confirm, with a source of
// truth of its own.
package namespaces
