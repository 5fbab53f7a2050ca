// Package upstream is what running Kubernetes' own e2e specs (e2e.test,
// built by hack/kubernetes.sh --upstream-e2e) against the e2e cluster
// (internal/cluster with its controllers) needs, for e2e/upstream and make
// e2e-upstream (issue 26): stand-ins for the images the chosen specs pull,
// served under their upstream names; the results of e2e.test's JUnit
// report; and the parity of two runs of the same specs, directly against
// containerd and through cri-nstarget (every spec that passes directly must
// pass through the shim). Tests and tools only, on internal/harness; the
// product never imports it.
package upstream
