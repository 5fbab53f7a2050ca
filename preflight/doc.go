// Package preflight is `cri-nstarget check`: what a node needs before its
// kubelet is pointed at the shim, each need a line "ok|warn|fail: what —
// what to do". Gather reads the node (the kernel, the cgroup hierarchy,
// containerd over its sockets, NRI's socket, the listen socket's
// directories, the kubelet's command line and configuration) into Facts;
// the checks (check.go) are pure functions from Facts to Results, each
// table-tested with made-up facts. It says only what it saw: what cannot
// be seen from outside containerd (whether its NRI validator refuses
// namespace adjustments) is said to be unknown.
//
// It reads and connects only: it makes no file, registers no NRI plugin,
// and calls no CRI method but Version. Run as root, as the shim runs: the
// sockets and the kubelet's configuration are root's.
package preflight
