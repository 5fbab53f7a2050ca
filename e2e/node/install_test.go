//go:build node

package node

import (
	"strings"
	"testing"
	"time"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// The kubelet as the Kubernetes packages install it: their kubelet.service
// and kubeadm's drop-in (10-kubeadm.conf), with no bootstrap (the kubeconfig
// is given). cri-nstarget's own drop-in comes from its package.
const kubeletUnit = `[Unit]
Description=kubelet: The Kubernetes Node Agent
Documentation=https://kubernetes.io/docs/
Wants=network-online.target
After=network-online.target

[Service]
ExecStart=/usr/bin/kubelet
Restart=always
StartLimitInterval=0
RestartSec=10

[Install]
WantedBy=multi-user.target
`

const kubeadmDropIn = `[Service]
Environment="KUBELET_KUBECONFIG_ARGS=--kubeconfig=/etc/kubernetes/kubelet.conf"
Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"
EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env
EnvironmentFile=-/etc/default/kubelet
ExecStart=
ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS $KUBELET_EXTRA_ARGS
`

// kubeletConfig is what the recipe in docs/node-images.md says: the systemd
// cgroup driver, and failCgroupV1 left at its default (true), so that the
// kubelet starting at all proves cgroup v2. The rest are the defaults but
// for quicker status updates.
const kubeletConfig = `apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
cgroupDriver: systemd
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {clientCAFile: /etc/kubernetes/pki/ca.crt}
authorization: {mode: AlwaysAllow}
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
`

// readyProbe runs at boot as soon as the shim's unit is active: for a
// Type=notify unit, once the shim sent READY=1; for Type=simple, right after
// exec. It records whether the shim's socket was there at that moment, which
// the shim makes only once it is about to serve (2 to 3 s after exec under
// TCG). A CRI call would say more, but a Go client such as crictl takes
// about 15 s to start under TCG, by when any shim serves.
const readyProbe = `[Unit]
Description=Probe (e2e/node): the shim's CRI socket as soon as cri-nstarget.service is active
After=cri-nstarget.service
Wants=cri-nstarget.service

[Service]
Type=simple
ExecStart=/bin/sh -c 'if test -S /run/cri-nstarget/cri.sock; then echo serving; else echo "no socket"; fi >/run/nstarget-ready-probe.tmp && mv /run/nstarget-ready-probe.tmp /run/nstarget-ready-probe'

[Install]
WantedBy=multi-user.target
`

// bridgeConfList is the pods' network: Debian's containernetworking-plugins.
const bridgeConfList = `{
  "cniVersion": "1.0.0",
  "name": "nstarget-node",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.88.0.0/16"}]], "routes": [{"dst": "0.0.0.0/0"}]}}
  ]
}
`

// kubeadmFlags is what kubeadm (up to 1.33) writes for a node whose runtime
// is containerd: its endpoint as a flag, in KUBELET_KUBEADM_ARGS.
const kubeadmFlags = `KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock"
`

// base installs containerd and the kubelet as a baker's first boot would,
// the kubelet on containerd directly, and waits for the node to be Ready.
// It stands in for kube-proxy too: the kubernetes Service's address
// (10.96.0.1:443, which pods are given) goes to the apiserver on the host.
func (r *run) base(t *testing.T) {
	start := time.Now()
	r.share(t, debOld, "cri-nstarget-old.deb", 0o644)
	r.share(t, debNew, "cri-nstarget-new.deb", 0o644)
	r.share(t, kubeBin+"/kubelet", "kubelet", 0o755)
	r.share(t, crictlBin, "crictl", 0o755)
	if r.b.install != "" {
		r.share(t, containerd2+"/containerd", "containerd2/containerd", 0o755)
		r.share(t, containerd2+"/containerd-shim-runc-v2", "containerd2/containerd-shim-runc-v2", 0o755)
		r.share(t, runc2, "runc", 0o755)
	}
	kubeconfig, err := r.kube.NodeKubeconfig(nodeName, strings.Replace(r.kube.Server(), "127.0.0.1", hostIP, 1))
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := strings.Cut(strings.TrimPrefix(r.kube.Server(), "https://"), ":")
	r.write(t, "etc/kubelet.conf", kubeconfig, 0o600)
	r.share(t, r.kube.CAFile(), "etc/ca.crt", 0o644)
	r.write(t, "etc/kubelet.service", []byte(kubeletUnit), 0o644)
	r.write(t, "etc/10-kubeadm.conf", []byte(kubeadmDropIn), 0o644)
	r.write(t, "etc/kubeadm-flags.env", []byte(kubeadmFlags), 0o644)
	r.write(t, "etc/kubelet-config.yaml", []byte(kubeletConfig), 0o644)
	r.write(t, "etc/10-bridge.conflist", []byte(bridgeConfList), 0o644)
	r.write(t, "etc/nstarget-ready-probe.service", []byte(readyProbe), 0o644)
	r.write(t, "etc/containerd.toml", []byte(r.b.config(r.registry+"/"+harness.PauseName)), 0o644)
	r.write(t, "etc/hosts.toml", []byte(hostsTOML(r.registry)), 0o644)
	t.Logf("host: files into the share in %s", since(start))

	start = time.Now()
	r.sh(t, 5*time.Minute, `
install -m 0755 /mnt/nst/kubelet /usr/bin/kubelet
install -m 0755 /mnt/nst/crictl /usr/local/bin/crictl
printf 'runtime-endpoint: unix:///run/containerd/containerd.sock\nimage-endpoint: unix:///run/containerd/containerd.sock\ntimeout: 60\n' >/etc/crictl.yaml
`+r.b.install+`
install -D -m 0644 /mnt/nst/etc/containerd.toml /etc/containerd/config.toml
install -D -m 0644 /mnt/nst/etc/hosts.toml "/etc/containerd/certs.d/`+r.registry+`/hosts.toml"
install -D -m 0644 /mnt/nst/etc/10-bridge.conflist /etc/cni/net.d/10-bridge.conflist
install -D -m 0644 /mnt/nst/etc/kubelet.service /usr/lib/systemd/system/kubelet.service
install -D -m 0644 /mnt/nst/etc/10-kubeadm.conf /etc/systemd/system/kubelet.service.d/10-kubeadm.conf
install -D -m 0644 /mnt/nst/etc/kubeadm-flags.env /var/lib/kubelet/kubeadm-flags.env
install -D -m 0600 /mnt/nst/etc/kubelet.conf /etc/kubernetes/kubelet.conf
install -D -m 0644 /mnt/nst/etc/ca.crt /etc/kubernetes/pki/ca.crt
install -D -m 0644 /mnt/nst/etc/kubelet-config.yaml /var/lib/kubelet/config.yaml
iptables -t nat -A OUTPUT -d 10.96.0.1/32 -p tcp --dport 443 -j DNAT --to-destination `+hostIP+`:`+port+`
systemctl daemon-reload
systemctl restart containerd
systemctl enable --quiet --now kubelet.service
`)
	t.Logf("guest: installed and started in %s", since(start))
	if v := r.sh(t, time.Minute, "crictl version | sed -n 's/^RuntimeVersion: *//p'"); !strings.Contains(v, r.b.version) {
		t.Fatalf("containerd in the guest is %q, want %s", v, r.b.version)
	}
	start = time.Now()
	r.waitReady(t, 5*time.Minute)
	t.Logf("node %s Ready on containerd %s after the units started", nodeName, since(start))
}

// install installs the package and points the kubelet at the shim, as a
// baker's image does, and waits for the node to be Ready through it.
func (r *run) install(t *testing.T) {
	dropIn := ""
	if shimDropIn != "" {
		r.write(t, "etc/99-test.conf", []byte(shimDropIn+"\n"), 0o644)
		dropIn = "install -D -m 0644 /mnt/nst/etc/99-test.conf /etc/systemd/system/cri-nstarget.service.d/99-test.conf"
		t.Logf("cri-nstarget.service gets the drop-in %q (NSTARGET_NODE_SHIM_DROPIN)", shimDropIn)
	}
	start, restarted := time.Now(), r.guestNow(t)
	r.sh(t, 5*time.Minute, `
dpkg -i /mnt/nst/cri-nstarget-old.deb >/dev/null
install -D -m 0644 /usr/share/doc/cri-nstarget/examples/kubelet.service.d/20-cri-nstarget.conf /etc/systemd/system/kubelet.service.d/20-cri-nstarget.conf
`+dropIn+`
install -D -m 0644 /mnt/nst/etc/nstarget-ready-probe.service /etc/systemd/system/nstarget-ready-probe.service
systemctl daemon-reload
systemctl enable --quiet --now cri-nstarget.service
systemctl enable --quiet nstarget-ready-probe.service
systemctl restart kubelet.service
`)
	t.Logf("guest: the package installed, the shim started and the kubelet restarted in %s", since(start))
	r.waitReadySince(t, restarted, 5*time.Minute)
	t.Logf("node %s Ready through the shim %s after the kubelet's restart", nodeName, since(start))
}

// hostsTOML sends the guest's pulls from registry to it over plain HTTP.
func hostsTOML(registry string) string {
	return "server = \"http://" + registry + "\"\n\n[host.\"http://" + registry + "\"]\n  capabilities = [\"pull\", \"resolve\"]\n"
}
