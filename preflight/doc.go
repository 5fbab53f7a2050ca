// Package preflight is `cri-nstarget check`: what a node needs before its
// kubelet is pointed at the shim, each need a line "ok|warn|fail: what —
// what to do". Gather reads the node (the kernel, the cgroup hierarchy,
// containerd over its sockets, NRI's socket, the listen socket's
// directories, the kubelet's command line, configuration and version) into
// Facts; the checks (check.go) are pure functions from Facts to Results,
// each table-tested with made-up facts. It says only what it saw: what cannot
// be seen from outside containerd (whether its NRI validator refuses
// namespace adjustments) is said to be unknown.
//
// It reads, connects and asks: it makes no file, registers no NRI plugin,
// calls no CRI method but Version, and runs no program but the kubelet's own
// binary with --version (the running kubelet's /proc/PID/exe, else the
// kubelet on PATH). Run as root, as the shim runs: the sockets, the
// kubelet's configuration and its binary in /proc are root's.
package preflight
