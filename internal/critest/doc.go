// Package critest is what running cri-tools' critest (the version hack/critest/go.mod names) against a
// private containerd needs, for the conformance matrix (cmd/nstarget-matrix)
// and critest -benchmark (cmd/nstarget-bench critest) alike: stand-ins for the
// images critest pulls, the registries it pulls them from (aliased to the
// harness's loopback registry), and a backend (containerd with a CNI bridge
// for critest's pod network). Tools only, on internal/harness; the product
// never imports it.
package critest
