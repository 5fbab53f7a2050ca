//go:build node

// Package node runs cri-nstarget as node-image bakers ship it (issue 25;
// make node-e2e and make node-e2e-full): a Debian 12 guest under qemu with
// systemd as PID 1 on cgroup v2 (internal/node), the .deb installed with
// dpkg, containerd with the systemd cgroup driver, and a kubelet with
// cgroupDriver systemd and the default failCgroupV1, all started by their
// units. Every scenario is asserted from inside the node. On containerd 2.4
// the node starts with its kubelet on containerd; the plugin mode
// (deploy/plugin, plugin_test.go) is applied and deleted on it, then the
// cluster install
// (deploy/, a DaemonSet) puts the shim on it, upgrades it and takes it off
// first (cluster_test.go), with the shim unit's journal and restarts
// checked while it is on; then the package's scenarios run.
//
// The control plane (etcd, kube-apiserver) runs on the host, reached by the
// guest at qemu's 10.0.2.2: it is not what a node image carries, and under
// TCG on one vCPU it would take the guest's only CPU for minutes; so do
// kube-controller-manager and kube-scheduler, for the DaemonSet. The images
// (busybox, the sandbox's pause, the cluster install's) come from a registry
// on the host too.
package node

import (
	"fmt"
	"os"
	"testing"
)

// The test's inputs, set by the Makefile (make node-e2e).
var (
	nodeImage   = os.Getenv("NSTARGET_NODE_IMAGE")       // hack/node/image.sh's directory
	nodeAgent   = os.Getenv("NSTARGET_NODE_AGENT")       // internal/nodeagent, static
	nodeAccel   = os.Getenv("NSTARGET_NODE_ACCEL")       // tcg (default) or kvm
	nodeCPUs    = os.Getenv("NSTARGET_NODE_CPUS")        // the guest's vCPUs (default 1)
	nodeLogs    = os.Getenv("NSTARGET_NODE_LOGS")        // the consoles and the guests' journals, kept
	debOld      = os.Getenv("NSTARGET_NODE_DEB")         // the .deb installed first
	debNew      = os.Getenv("NSTARGET_NODE_DEB_UPGRADE") // a newer version of it, for the upgrade
	kubeBin     = os.Getenv("NSTARGET_KUBERNETES_BIN")   // kube-apiserver, kubelet, kubectl
	etcdBin     = os.Getenv("NSTARGET_ETCD")
	crictlBin   = os.Getenv("NSTARGET_NODE_CRICTL")
	containerd2 = os.Getenv("NSTARGET_CONTAINERD2_DIR") // containerd, containerd-shim-runc-v2 (2.4)
	runc2       = os.Getenv("NSTARGET_RUNC2")           // runc 1.5 for it
	// The cluster install's images (make image): two versions (OCI layout
	// tars), one whose shim is never healthy, and two whose shim is healthy
	// but useless (internal/badshim: the node NotReady through it, no
	// container created through it) (OCI layouts).
	imageV1       = os.Getenv("NSTARGET_NODE_IMAGE_V1")
	imageV2       = os.Getenv("NSTARGET_NODE_IMAGE_V2")
	imageBad      = os.Getenv("NSTARGET_NODE_IMAGE_BAD")
	imageNotReady = os.Getenv("NSTARGET_NODE_IMAGE_NOTREADY")
	imageNoCreate = os.Getenv("NSTARGET_NODE_IMAGE_NOCREATE")
	// shimDropIn, when set, is installed as a drop-in of cri-nstarget.service
	// (e.g. "[Service]\nType=simple", or ExecStart= with other flags): to
	// see the tests fail without a mechanism the unit or a flag gives.
	shimDropIn = os.Getenv("NSTARGET_NODE_SHIM_DROPIN")
	// installArgs, when set, are added to the installer's arguments in
	// the DaemonSet (e.g. a bound set otherwise): to see the tests fail
	// without a mechanism a flag gives.
	installArgs = os.Getenv("NSTARGET_NODE_INSTALL_ARGS")
)

func TestMain(m *testing.M) {
	for name, v := range map[string]string{
		"NSTARGET_NODE_IMAGE": nodeImage, "NSTARGET_NODE_AGENT": nodeAgent, "NSTARGET_NODE_DEB": debOld,
		"NSTARGET_NODE_DEB_UPGRADE": debNew, "NSTARGET_KUBERNETES_BIN": kubeBin, "NSTARGET_ETCD": etcdBin,
		"NSTARGET_NODE_CRICTL": crictlBin, "NSTARGET_CONTAINERD2_DIR": containerd2, "NSTARGET_RUNC2": runc2,
		"NSTARGET_NODE_IMAGE_V1": imageV1, "NSTARGET_NODE_IMAGE_V2": imageV2, "NSTARGET_NODE_IMAGE_BAD": imageBad,
		"NSTARGET_NODE_IMAGE_NOTREADY": imageNotReady, "NSTARGET_NODE_IMAGE_NOCREATE": imageNoCreate,
	} {
		if v == "" {
			fmt.Fprintf(os.Stderr, "node: %s is unset (make node-e2e sets every input)\n", name)
			os.Exit(1)
		}
	}
	os.Exit(m.Run())
}
