package cluster

import (
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"sort"
	"strings"
)

const (
	x509ServerAuth = x509.ExtKeyUsageServerAuth
	x509ClientAuth = x509.ExtKeyUsageClientAuth
)

// writeKubeconfig writes a kubeconfig for server with a client certificate.
func writeKubeconfig(path, server, ca, cert, key string) error {
	return os.WriteFile(path, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority: %s
users:
- name: e2e
  user:
    client-certificate: %s
    client-key: %s
contexts:
- name: e2e
  context:
    cluster: e2e
    user: e2e
current-context: e2e
`, server, ca, cert, key)), 0o600)
}

// kubeconfigData is a kubeconfig for server with the CA and the client
// certificate and key in it, for a machine that has not these files.
func kubeconfigData(server, ca, cert, key string) ([]byte, error) {
	var data [3]string
	for i, f := range []string{ca, cert, key} {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		data[i] = base64.StdEncoding.EncodeToString(b)
	}
	return []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: node
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: node
  context:
    cluster: e2e
    user: node
current-context: node
`, server, data[0], data[1], data[2])), nil
}

// kubeletSettings are the per-run values of the kubelet's configuration.
type kubeletSettings struct {
	Port, HealthzPort string
	CA, Cert, Key     string
	CgroupRoot        string
	Runtime           string // CRI endpoint, for both services
	PodLogs           string
	VolumePlugins     string
	// FeatureGates are the kubelet's featureGates; none when empty. A
	// kubelet refuses a gate it does not know.
	FeatureGates map[string]bool
}

// kubeletConfig is the KubeletConfiguration for a node on a machine like
// this one: cgroupfs (no systemd as PID 1), swap tolerated, no OOM score
// change (the kubelet cannot lower its own), no iptables chains, serving
// on 127.0.0.1 only with certificates from the run's CA, and every path it
// writes under the run's directory. Eviction and image GC thresholds are
// low: a full disk on a test machine must not evict the test's pods.
//
// failCgroupV1: false lets kubelet 1.35 and later start on this machine kind,
// which is cgroup v1: they refuse a cgroup v1 host unless the config file
// says so (there is no flag). Older kubelets accept the field. A real node
// should run cgroup v2 (docs/operations.md).
func kubeletConfig(s kubeletSettings) string {
	lines := []string{
		"apiVersion: kubelet.config.k8s.io/v1beta1",
		"kind: KubeletConfiguration",
		"address: 127.0.0.1",
		"port: " + s.Port,
		"readOnlyPort: 0",
		"healthzBindAddress: 127.0.0.1",
		"healthzPort: " + s.HealthzPort,
		"tlsCertFile: " + s.Cert,
		"tlsPrivateKeyFile: " + s.Key,
		"authentication:",
		"  anonymous: {enabled: false}",
		"  webhook: {enabled: false}",
		"  x509: {clientCAFile: " + s.CA + "}",
		"authorization: {mode: AlwaysAllow}",
		"containerRuntimeEndpoint: " + s.Runtime,
		"imageServiceEndpoint: " + s.Runtime,
		"cgroupDriver: cgroupfs",
		"cgroupRoot: " + s.CgroupRoot,
		"failCgroupV1: false",
		"failSwapOn: false",
		"oomScoreAdj: 0",
		"makeIPTablesUtilChains: false",
		"podLogsDir: " + s.PodLogs,
		"volumePluginDir: " + s.VolumePlugins,
		`resolvConf: ""`,
		"enableControllerAttachDetach: false",
		"serializeImagePulls: false",
		"syncFrequency: 10s",
		"nodeStatusUpdateFrequency: 4s",
		"imageGCHighThresholdPercent: 100",
		"imageGCLowThresholdPercent: 99",
		"evictionHard:",
		`  memory.available: "1Mi"`,
		`  nodefs.available: "1%"`,
		`  nodefs.inodesFree: "1%"`,
		`  imagefs.available: "1%"`,
		`  imagefs.inodesFree: "1%"`,
	}
	if len(s.FeatureGates) > 0 {
		lines = append(lines, "featureGates:")
		names := make([]string, 0, len(s.FeatureGates))
		for name := range s.FeatureGates {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			lines = append(lines, fmt.Sprintf("  %s: %t", name, s.FeatureGates[name]))
		}
	}
	return strings.Join(lines, "\n") + "\n"
}
