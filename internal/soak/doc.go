// Package soak runs a busy node under random faults (issue 36, make soak):
// the e2e cluster (internal/cluster: etcd, kube-apiserver, a kubelet whose
// runtime is cri-nstarget in front of a private containerd, internal/harness)
// with about 30 pods whose containers each have a PID namespace of their
// own, pods deleted and made again all the time, and an ephemeral debug
// container with --target about once a second against a random container;
// meanwhile faults arrive at seeded random times (Schedule): the shim killed
// or stopped and restarted as systemd would, containerd restarted, a target
// killed as its debug container is made, the shim's NRI plugin registering
// again while pods are removed.
//
// Every debug container is judged (Judge): it joined its target (its PID
// namespace is the one the target instance printed), or it fell back with a
// reason in its targeting record, or it was refused with a typed gRPC
// error; anything else is a wrong join and fails the run. After each fault
// the node and the pods must be back within Config.RecoveryBound; every CRI
// call the soak makes has a deadline, and one that reaches it is a hang. At
// the end no pin, intent record, mount, container or sandbox may be left
// that no pod owns, and the shim's RSS, open fds and goroutines, sampled
// after a warm-up, must stay within Growth's bound.
//
// The pure parts (the schedule, the oracle, the growth bound, the report)
// are unit-tested; Run needs root, containerd, runc and Kubernetes'
// binaries, and is started by cmd/nstarget-soak.
package soak
