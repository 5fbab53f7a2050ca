// Package installer puts cri-nstarget on a node from inside a privileged
// pod (cmd/cri-nstarget-install, run by the DaemonSet of deploy/), and takes
// it off again. It sees the host's root at Options.Root and acts on the
// host through small interfaces: systemd (its D-Bus API), the Node in the
// apiserver, the shim's health service, containerd's CRI, and the host's
// mounts.
//
// Install, in order, each step recorded before it is taken in a state file
// on the host (StatePath, written atomically), so that an installer killed
// at any step and started again resumes from it or rolls back. The steps
// are one table (phases.go): each Phase has its step, the step run first
// when an installer resumes there, the phase the step ends at, and the
// phases a rollback and a removal start at from it (the kubelet put back
// first from exactly the phases after its edit may have been written).
// Install, a rollback and a removal walk it (walk); upgrades run from
// PhaseDone (upgrade.go). The state file keeps the form installers before
// the table wrote ("rolling-back" and "removing", with flags saying
// whether the kubelet is still to be put back), so that installers of
// either side read it the same (state.go):
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
//     once; a slot lost, slots.Held.Lost, stops the install before the
//     kubelet is touched), the host's guard armed (guard.go), the edit
//     written, the kubelet restarted; then its command line and files must
//     give the shim's endpoint, the node must be Ready in a status the new
//     kubelet reported, and a smoke test must pass through the shim (a pod
//     sandbox run and removed; a container run to exit 0 in the
//     installer's own pod, which the kubelet knows, and removed);
//  4. done: the guard disarmed, the slot given back, the Node labelled, an
//     Event.
//
// The host's guard is a transient systemd timer and service, made through
// D-Bus before each restart of the kubelet onto the shim: GuardAfter later,
// unless disarmed, it puts the kubelet's file back (saved beside the state
// file) with host binaries and restarts the kubelet, with no installer pod
// at all. A guard that fired is noticed (the file as it was) and ends in a
// rollback.
//
// When the shim is not healthy within HealthTimeout, the new kubelet
// reports the node NotReady through it for NotReadyGrace, the node is not
// Ready through it within ReadyTimeout, or the smoke test fails, the
// installer rolls back by itself: the kubelet's file as it was and the
// kubelet restarted and Ready again first (a restore never waits for a
// restart slot; the apiserver out of reach does not fail it), then the
// guard disarmed, the shim stopped and its files removed. Every end state
// gives the slot back. The node keeps only the state file, which names the
// reason and the shim that failed (the same binary is not tried again).
// The kubelet never points at a socket nothing serves: the shim is stopped
// only after the kubelet has left it.
//
// A new version (a different binary) on a node where the shim runs is an
// upgrade: the new binary first answers on a socket of its own (a trial,
// Options.Trials: SERVING and the CRI Version, then stopped), then the
// binary is replaced and the shim alone restarted and healthy again; the
// kubelet is not restarted. A binary that fails its trial is never written
// and the shim serving is not touched; one that is not healthy once
// restarted is replaced by the one before it (kept beside the state file)
// and restarted. Either way the node stays on the version before
// (upgrade-failed), which is safe. A half-done install of another version
// is made this version's before the kubelet is touched, or finished and
// then upgraded after; it is never reported as this version.
//
// Refused, rolled-back and upgrade-failed nodes are settled (Settled): the
// kubelet on a runtime that serves. The apiserver's absence
// (ErrUnreachable) is a pause: the waits on the Node's Ready go on, and no
// rollback is decided without an answer.
//
// Remove (the DaemonSet's cleanup mode) undoes an install from its state:
// the kubelet back on its own endpoint and Ready (and the guard disarmed),
// then the shim's unit, files and config removed (a config changed since
// it was written is kept), and the pins no CREATED container needs
// unmounted, in the host's mount namespace.
package installer
