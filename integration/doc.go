// Package integration tests cri-nstarget as a process in front of a real
// containerd and runc that the tests start (internal/harness), with images
// built locally from busybox-static. Run as root:
//
//	go test -tags integration -count=1 -v ./integration/
//
// Each case checks behaviour from inside the containers (ps, the
// /proc/self/ns links) and proves the shim did the work: the CRI config
// containerd recorded says POD, and the spec's namespace path is the shim's
// pin.
package integration
