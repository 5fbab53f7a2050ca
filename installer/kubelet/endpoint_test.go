package kubelet

import (
	"strings"
	"testing"
)

func TestEndpoint(t *testing.T) {
	for _, tc := range []struct {
		fixture, endpoint, from string
	}{
		{"kubeadm-flags", "unix:///var/run/containerd/containerd.sock", "its command line (--container-runtime-endpoint)"},
		{"dropin-execstart", "unix:///run/containerd/containerd.sock", "its command line (--container-runtime-endpoint)"},
		{"two-places", "unix:///run/containerd/containerd.sock", "its command line (--container-runtime-endpoint)"},
		{"invisible", "unix:///run/containerd/containerd.sock", "its command line (--container-runtime-endpoint)"},
		{"kubeadm-config", "unix:///var/run/containerd/containerd.sock", "/var/lib/kubelet/config.yaml"},
		{"config-dir", "unix:///run/containerd/containerd.sock", "/etc/kubernetes/kubelet.conf.d/50-runtime.conf"},
		{"config-default", DefaultEndpoint, "/var/lib/kubelet/config.yaml (no containerRuntimeEndpoint: the default)"},
		{"json-config", DefaultEndpoint, "/etc/kubernetes/kubelet.json (no containerRuntimeEndpoint: the default)"},
		{"no-config", DefaultEndpoint, "its default (neither --container-runtime-endpoint nor --config on its command line)"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			ep, from, err := Endpoint(readFixture(t, tc.fixture))
			if err != nil || ep != tc.endpoint || from != tc.from {
				t.Errorf("Endpoint = %q, %q, %v; want %q, %q", ep, from, err, tc.endpoint, tc.from)
			}
		})
	}
}

// A --config that was not read, or is no KubeletConfiguration, is an
// error, not the default.
func TestEndpointRefuses(t *testing.T) {
	n := Node{Argv: []string{"/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml"}}
	if _, _, err := Endpoint(n); err == nil {
		t.Error("Endpoint without the --config file read: no error")
	}
	n.Files = []File{{Path: "/var/lib/kubelet/config.yaml", Kind: ConfigFile, Data: []byte("kind: Pod\ncontainerRuntimeEndpoint: x\n")}}
	_, _, err := Endpoint(n)
	if err == nil || !strings.Contains(err.Error(), `kind "Pod"`) {
		t.Errorf("Endpoint with a config of kind Pod: %v, want its kind named", err)
	}
}
