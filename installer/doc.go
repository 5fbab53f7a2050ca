// Package installer puts cri-nstarget on a node from inside a privileged
// pod (cmd/cri-nstarget-install, run by the DaemonSet of deploy/), and takes
// it off again. It sees the host's root at Options.Root and acts on the
// host through small interfaces: systemd (its D-Bus API), the Node in the
// apiserver, the shim's health service, containerd's CRI, and the host's
// mounts.
//
// Install, in order, each step recorded before it is taken in a state file
// on the host (StatePath, written atomically), so that an installer killed
// at any step and started again resumes from it or rolls back:
//
//  1. inspect: the kubelet's unit, its command line (the host's
//     /proc/PID/cmdline) and the one place that sets its runtime endpoint
//     (package kubelet); a layout it cannot change, a kubelet not on
//     containerd, a shim installed some other way: a refusal, with nothing
//     changed on the host;
//  2. files: the shim's binary, its unit (systemd/cri-nstarget.service.in)
//     and, when there is none, its config, each written atomically; the
//     unit enabled and started, then the shim's grpc.health.v1 SERVING;
//  3. kubelet: a restart slot taken (package slots: at most N nodes at
//     once), the edit written, the kubelet restarted; then its command line
//     and files must give the shim's endpoint, and the node must be Ready
//     in a status the new kubelet reported;
//  4. done: the slot given back, the Node labelled, an Event.
//
// When the shim is not healthy within HealthTimeout, or the node not Ready
// through it within ReadyTimeout, the installer rolls back by itself: the
// kubelet's file as it was and the kubelet restarted (under a slot) and
// Ready again first, then the shim stopped and its files removed. The node
// keeps only the state file, which names the reason and the shim that
// failed (the same binary is not tried again). The kubelet never points at
// a socket nothing serves: the shim is stopped only after the kubelet has
// left it.
//
// A new version (a different binary) on a node where the shim runs is an
// upgrade: the binary replaced, the shim alone restarted and healthy again;
// the kubelet is not restarted. A new binary that is not healthy is replaced
// by the one before it (kept beside the state file) and restarted, and the
// node stays on it.
//
// Remove (the DaemonSet's cleanup mode) undoes an install from its state:
// the kubelet back on its own endpoint and Ready, then the shim's unit, files
// and config removed (a config changed since it was written is kept), and
// the pins no CREATED container needs unmounted, in the host's mount
// namespace.
package installer
