// Package harness runs a private containerd + runc for integration tests and
// demos, with locally built images and no network.
//
// It builds tiny OCI images from the host's static /bin/busybox (BuildBusybox),
// serves them from a read-only OCI distribution registry on 127.0.0.1
// (StartRegistry), and starts a containerd whose root, state, sockets and
// runc state all live under one short temporary directory (StartContainerd).
// Env bundles the three; StartForTest wires an Env into a test's Cleanup.
//
// Stopping a Containerd leaves the machine as it was found: pods and
// containers are removed through CRI, containerd and any shim it left behind
// are killed by PID, mounts under the directory are unmounted and the
// directory is removed.
package harness
