// Package pins keeps pins of namespaces on disk, one directory per
// container: <dir>/<container id>/<kind>. It is mechanism beside package
// namespaces (which makes one pin): which container's namespaces are pinned,
// where, and releasing them all. Nothing about pins lives only in memory, so
// a restarted proxy sees every pin its predecessor made (New: mounts of the
// host's mount namespace). The plugin mode's pins (Through) are mounts of
// its own mount namespace, named to the runtime through its root
// (/proc/<pid>/root/...), and live as long as its process. It holds no lock:
// each container's pins are made and released by the calls about that
// container, and the file system orders the rest.
//
// Their layout in a state dir (the config's state_dir) is named here, for
// the installer, which releases the pins when it removes the shim, and for
// the lab's soak, which looks for leaked ones: Under and ContainerOf.
//
// The policy (which namespaces to pin for whom, and when) is the caller's.
package pins
