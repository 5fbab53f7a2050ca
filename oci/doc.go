// Package oci holds the pure OCI runtime-spec changes cri-nstarget makes to a
// container: point a namespace at a path, replace a mount (the target's
// /dev/shm), and record what the shim did (or why it fell back) in an
// annotation. It does no I/O.
//
// Options work on a specs.Spec. Patch applies them to the JSON a runtime
// stored, rewriting only the fields options may touch (annotations, mounts
// and linux.namespaces; of the mounts only the entries that changed), so
// that fields this package's runtime-spec version does not know survive
// unchanged.
package oci
