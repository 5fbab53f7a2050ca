// Package namespaces holds the Linux namespace facts cri-nstarget relies on:
// the identity of a namespace (device and inode of its nsfs file), a
// pidfd-verified open of a process's namespaces, pinning a namespace by
// bind-mounting it onto a file, and whether a PID namespace still has an
// init that new processes can join.
//
// It knows nothing of gRPC or containerd: callers pass in process ids and
// paths, and a verification callback where they must confirm a process's
// identity with a source of truth of their own.
package namespaces
