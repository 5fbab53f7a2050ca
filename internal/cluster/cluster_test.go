package cluster

import (
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPKIChains(t *testing.T) {
	p, err := newPKI(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(p.cert)
	for _, tc := range []struct {
		spec  certSpec
		usage x509.ExtKeyUsage
		name  string // DNS name to verify, server certificates only
	}{
		{certSpec{name: "srv", cn: "kube-apiserver", usage: x509ServerAuth, dns: []string{"localhost"}, ips: []net.IP{net.IPv4(127, 0, 0, 1)}}, x509.ExtKeyUsageServerAuth, "localhost"},
		{certSpec{name: "node", cn: "system:node:localhost", orgs: []string{"system:nodes"}, usage: x509ClientAuth}, x509.ExtKeyUsageClientAuth, ""},
	} {
		certFile, keyFile, err := p.issue(tc.spec)
		if err != nil {
			t.Fatal(err)
		}
		cert := readCert(t, certFile)
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.name, KeyUsages: []x509.ExtKeyUsage{tc.usage}}); err != nil {
			t.Errorf("%s does not verify against the run's CA: %v", tc.spec.name, err)
		}
		if cert.Subject.CommonName != tc.spec.cn || strings.Join(cert.Subject.Organization, ",") != strings.Join(tc.spec.orgs, ",") {
			t.Errorf("%s subject = %v", tc.spec.name, cert.Subject)
		}
		if fi, err := os.Stat(keyFile); err != nil || fi.Mode().Perm() != 0o600 {
			t.Errorf("key %s: %v, mode %v; want 0600", keyFile, err, fi.Mode())
		}
	}
}

func readCert(t *testing.T, path string) *x509.Certificate {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil {
		t.Fatalf("%s: no PEM", path)
	}
	c, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// The settings this machine kind needs (issue 15; failCgroupV1: false for
// kubelet 1.35 and later on cgroup v1, issue 23), and every path the kubelet
// writes by configuration under the run's directory.
func TestKubeletConfig(t *testing.T) {
	s := kubeletSettings{Port: "1", HealthzPort: "2", CA: "/r/ca", Cert: "/r/c", Key: "/r/k",
		CgroupRoot: "/nstarget-e2e-x", Runtime: "unix:///r/cri.sock", PodLogs: "/r/logs", VolumePlugins: "/r/vp"}
	cfg := kubeletConfig(s)
	for _, want := range []string{
		"cgroupDriver: cgroupfs", "failSwapOn: false", "oomScoreAdj: 0", "makeIPTablesUtilChains: false",
		"failCgroupV1: false",
		"address: 127.0.0.1", "healthzBindAddress: 127.0.0.1", "readOnlyPort: 0",
		"containerRuntimeEndpoint: unix:///r/cri.sock", "imageServiceEndpoint: unix:///r/cri.sock",
		"cgroupRoot: /nstarget-e2e-x", "podLogsDir: /r/logs", "volumePluginDir: /r/vp",
		"anonymous: {enabled: false}", "x509: {clientCAFile: /r/ca}",
	} {
		if !strings.Contains(cfg, "\n"+want+"\n") && !strings.Contains(cfg, "  "+want+"\n") {
			t.Errorf("kubelet config lacks %q:\n%s", want, cfg)
		}
	}
	if strings.Contains(cfg, "featureGates") {
		t.Errorf("kubelet config names feature gates without any set:\n%s", cfg)
	}
	s.FeatureGates = map[string]bool{"CRIListStreaming": true, "AnotherGate": false}
	if cfg := kubeletConfig(s); !strings.HasSuffix(cfg, "\nfeatureGates:\n  AnotherGate: false\n  CRIListStreaming: true\n") {
		t.Errorf("kubelet config with feature gates ends:\n%s", cfg[strings.LastIndex(cfg, "evictionHard"):])
	}
}

func TestFirstMissing(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "a"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ path, want string }{
		{filepath.Join(dir, "a"), ""},
		{filepath.Join(dir, "a", "b"), filepath.Join(dir, "a", "b")},
		{filepath.Join(dir, "a", "b", "c", "d.sock"), filepath.Join(dir, "a", "b")},
		{filepath.Join(dir, "x", "y"), filepath.Join(dir, "x")},
	} {
		if got := firstMissing(tc.path); got != tc.want {
			t.Errorf("firstMissing(%s) = %q, want %q", tc.path, got, tc.want)
		}
	}
}

// removeTree removes children before parents, as rmdir on cgroups needs.
func TestRemoveTree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cg")
	for _, d := range []string{"kubepods/besteffort/pod1", "kubepods/burstable"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := removeTree(dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still there: %v", dir, err)
	}
	if err := removeTree(dir); err != nil {
		t.Errorf("removing it again: %v", err)
	}
}

// The kubelet's root is made in the v1 hierarchies (or the one cgroup2
// mount of a v2 host), and removed and checked in every cgroup mount: on a
// hybrid host the kubelet also makes its cgroups in the controller-less
// cgroup2 mount, and a run left them there.
func TestCgroupMounts(t *testing.T) {
	const (
		v1     = "cgroup /sys/fs/cgroup/cpu cgroup rw,nosuid,cpu 0 0\ncgroup /sys/fs/cgroup/memory cgroup rw,memory 0 0\n"
		hybrid = "cgroup2 /sys/fs/cgroup/unified cgroup2 rw,nsdelegate 0 0\n"
		other  = "proc /proc proc rw 0 0\ntmpfs /sys/fs/cgroup tmpfs ro,mode=755 0 0\n"
	)
	for _, tc := range []struct {
		name, mounts string
		kubelet, all string
		wantErr      bool
	}{
		{"v1", other + v1, "/sys/fs/cgroup/cpu /sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu /sys/fs/cgroup/memory", false},
		{"hybrid", other + v1 + hybrid, "/sys/fs/cgroup/cpu /sys/fs/cgroup/memory", "/sys/fs/cgroup/cpu /sys/fs/cgroup/memory /sys/fs/cgroup/unified", false},
		{"v2", "cgroup2 /sys/fs/cgroup cgroup2 rw 0 0\n", "/sys/fs/cgroup", "/sys/fs/cgroup", false},
		{"none", other, "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := parseCgroupMounts(strings.NewReader(tc.mounts))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(m.all(), " "); got != tc.all {
				t.Errorf("all = %q, want %q", got, tc.all)
			}
			hs, err := m.forKubelet()
			if (err != nil) != tc.wantErr {
				t.Fatalf("forKubelet error = %v, want error %v", err, tc.wantErr)
			}
			if got := strings.Join(hs, " "); got != tc.kubelet {
				t.Errorf("forKubelet = %q, want %q", got, tc.kubelet)
			}
		})
	}
}

// NodeRestriction is on, always. Without the controllers the
// ServiceAccount admission plugin stays off (nothing would make the service
// accounts it requires); with them it is on, and the controller manager
// signs tokens with the apiserver's key, publishes the run's CA, and runs
// each controller under its own service account (RBAC).
func TestControllerFlags(t *testing.T) {
	if got, off := enabledAdmission(false), disabledAdmission(false); got != "NodeRestriction" || off != "--disable-admission-plugins=ServiceAccount" {
		t.Errorf("without controllers: enabled %q, %s", got, off)
	}
	if got, off := enabledAdmission(true), disabledAdmission(true); got != "NodeRestriction,ServiceAccount" || off != "--disable-admission-plugins=" {
		t.Errorf("with controllers: enabled %q, %s", got, off)
	}
	kcm := strings.Join(controllerManagerArgs("/r/kcm.kubeconfig", "/r/sa.key", "/r/ca.crt", "/r/vp", "1"), " ")
	sched := strings.Join(schedulerArgs("/r/sched.kubeconfig", "2"), " ")
	for _, tc := range []struct{ args, want string }{
		{kcm, "--kubeconfig /r/kcm.kubeconfig"},
		{kcm, "--service-account-private-key-file /r/sa.key"},
		{kcm, "--use-service-account-credentials=true"},
		{kcm, "--root-ca-file /r/ca.crt"},
		{kcm, "--flex-volume-plugin-dir /r/vp"},
		{kcm, "--bind-address 127.0.0.1 --secure-port 1"},
		{kcm, "--leader-elect=false"},
		{sched, "--kubeconfig /r/sched.kubeconfig"},
		{sched, "--bind-address 127.0.0.1 --secure-port 2"},
		{sched, "--leader-elect=false"},
	} {
		if !strings.Contains(tc.args, tc.want) {
			t.Errorf("%q lacks %q", tc.args, tc.want)
		}
	}
}

// Start looks for the kubelet where Options.Kubelet says, not in Bin: an
// older kubelet under Bin's control plane. Bin here has every binary,
// a kubelet included, and Options.Kubelet names one that does not exist, so
// Start must refuse before it makes or starts anything.
func TestStartKubeletBinary(t *testing.T) {
	bin := t.TempDir()
	for _, name := range []string{"kube-apiserver", "kubelet", "kubectl", "etcd"} {
		if err := os.WriteFile(filepath.Join(bin, name), []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Join(t.TempDir(), "k")
	missing := filepath.Join(t.TempDir(), "kubelet-v1.35")
	_, err := Start(t.Context(), Options{Dir: dir, Bin: bin, Etcd: filepath.Join(bin, "etcd"), Kubelet: missing})
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Start with a missing Options.Kubelet: %v, want an error naming %s", err, missing)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("Start made %s before refusing: %v", dir, err)
	}
}

// TestNodeConfig: NodeConfig holds the components' flags and the kubelet's
// configuration, the same for another directory, binaries or runtime
// socket, and changed by what changes them.
func TestNodeConfig(t *testing.T) {
	base := Options{Dir: "/tmp/a", Bin: "/k", RuntimeEndpoint: "unix:///tmp/a/cri.sock", Controllers: true}
	want := NodeConfig(base)
	for _, s := range []string{"kube-apiserver --etcd-servers", "NodeRestriction,ServiceAccount", "kube-controller-manager ", "kube-scheduler ", "kubelet --config", "failCgroupV1: false"} {
		if !strings.Contains(want, s) {
			t.Errorf("no %q in:\n%s", s, want)
		}
	}
	other := Options{Dir: "/tmp/b", Bin: "/other", Kubelet: "/other/kubelet", RuntimeEndpoint: "unix:///tmp/b/shim.sock", Controllers: true}
	if got := NodeConfig(other); got != want {
		t.Errorf("another directory, binaries and socket changed it:\n%s\nwas\n%s", got, want)
	}
	for name, change := range map[string]func(*Options){
		"no controllers": func(o *Options) { o.Controllers = false },
		"a remote node":  func(o *Options) { o.RemoteNode = true },
	} {
		o := base
		change(&o)
		if NodeConfig(o) == want {
			t.Errorf("%s: NodeConfig stayed the same", name)
		}
	}
}
