// Package node boots a node under qemu, for tests of the installed package
// on the host kind users run (issue 25): Debian 12 with systemd as PID 1 on
// cgroup v2, built from Debian's packages by hack/node/image.sh.
//
// Boot starts qemu on that image with its disk as a snapshot (the image
// stays as built), user networking (the host's 127.0.0.1 is 10.0.2.2 in the
// guest), a host directory shared over 9p at /mnt/nst (VM.Share), and a
// virtio-serial port on which the guest runs the agent, internal/nodeagent,
// from that share. A reboot inside the same qemu keeps what the guest wrote
// to its disk, and the port (but see Run for a request in flight).
// Boot returns once the agent answers; VM.Run runs a shell command in the
// guest as root and returns its output and exit status; WaitRunning waits
// for systemd to finish starting and names the failed units if it did not.
//
// Stop powers the guest off, kills qemu by its PID if it has not exited by
// the deadline, and removes the run directory (the share with it).
//
// Under TCG (the default; KVM only where /dev/kvm works for real, see
// Options.Accel) on one vCPU, the guest is "running" about 30 s after qemu
// starts, and a request that runs `true` takes about 45 ms there and back.
package node
