package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// NodeName is the kubelet's node: the apiserver reaches the kubelet by this
// name (--kubelet-preferred-address-types=Hostname), since the kubelet
// refuses a loopback node IP.
const NodeName = "localhost"

// ContainerLogsDir is where the kubelet links every container's log
// (hard-coded in the kubelet); Close removes the links it made there, and
// the directory when the run created it.
const ContainerLogsDir = "/var/log/containers"

// hostPaths are made outside Options.Dir whatever the configuration says:
// the kubelet's device-plugin socket (a constant of the device plugin API),
// its log links, and util-linux's mount table lock (the kubelet runs mount(8)
// to make its root dir shared). Close removes each one the run created,
// from the first of its directories that was not there before.
var hostPaths = []string{"/var/lib/kubelet/device-plugins/kubelet.sock", ContainerLogsDir, "/run/mount/utab"}

// Options configure Start.
type Options struct {
	// Dir holds everything the cluster writes: certificates, etcd's data,
	// the kubelet's root dir, pod logs and the components' logs.
	Dir string
	// Bin holds kube-apiserver, kubelet and kubectl (hack/kubernetes.sh).
	Bin string
	// Kubelet is the kubelet binary; default Bin/kubelet. It may be older
	// than Bin's control plane, as on a node being upgraded: kube-apiserver
	// supports kubelets up to three minors older than itself. So an older
	// Kubernetes needs only its kubelet built (hack/kubernetes.sh --kubelet).
	Kubelet string
	// Etcd is the etcd binary (hack/etcd.sh).
	Etcd string
	// RuntimeEndpoint is the kubelet's containerRuntimeEndpoint and
	// imageServiceEndpoint, e.g. "unix:///tmp/x/cri.sock".
	RuntimeEndpoint string
	// StartTimeout bounds each component's wait to be ready; default 90s.
	StartTimeout time.Duration
	// RemoteNode: no kubelet runs here (nor a cgroup root for one); a
	// kubelet elsewhere joins with NodeKubeconfig. ServerIPs are the
	// addresses it reaches the apiserver at (e.g. qemu's 10.0.2.2 for the
	// host's 127.0.0.1), added to the serving certificate.
	RemoteNode bool
	ServerIPs  []net.IP
	// Controllers starts kube-controller-manager (service accounts and
	// their tokens' root CA, namespace deletion, garbage collection) and
	// kube-scheduler from Bin as well, and turns the ServiceAccount
	// admission plugin back on: what Kubernetes' own e2e specs expect of a
	// cluster (e2e/upstream). Without it no controller runs, pods name the
	// node and mount no service-account token.
	Controllers bool
}

// Cluster is etcd, kube-apiserver and a kubelet on 127.0.0.1; see Start.
type Cluster struct {
	opts       Options
	pki        *pki
	cgroup     *cgroupRoot
	kubeconfig string // cluster-admin's, for kubectl
	server     string // the apiserver's URL on 127.0.0.1
	saKey      string // the service-account signing key, for the controller manager
	// created are the first missing directories of hostPaths at Start:
	// what the run will have made, removed by Close.
	created []string

	// etcd, apiserver, the controllers (Options.Controllers) and kubelet,
	// in start order; Stop stops them in reverse.
	procs []*proc

	// The kubelet's configuration and arguments as startKubelet made them;
	// RestartKubelet writes the configuration again with other feature gates.
	kubeletSettings kubeletSettings
	kubeletConfig   string // path
	kubeletArgs     []string
}

// Start makes a CA and the certificates, then starts etcd, kube-apiserver
// and a kubelet whose runtime is opts.RuntimeEndpoint, and waits until the
// node is Ready. On failure it undoes what it did and returns no Cluster.
func Start(ctx context.Context, opts Options) (_ *Cluster, retErr error) {
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 90 * time.Second
	}
	if opts.Kubelet == "" {
		opts.Kubelet = filepath.Join(opts.Bin, "kubelet")
	}
	binaries := []string{opts.Etcd, filepath.Join(opts.Bin, "kube-apiserver"), filepath.Join(opts.Bin, "kubectl")}
	if !opts.RemoteNode {
		binaries = append(binaries, opts.Kubelet)
	}
	if opts.Controllers {
		binaries = append(binaries, filepath.Join(opts.Bin, "kube-controller-manager"), filepath.Join(opts.Bin, "kube-scheduler"))
	}
	for _, b := range binaries {
		if _, err := exec.LookPath(b); err != nil {
			return nil, fmt.Errorf("cluster: %w (hack/kubernetes.sh, --upstream-e2e for the controllers; hack/etcd.sh)", err)
		}
	}
	c := &Cluster{opts: opts}
	for _, p := range hostPaths {
		if first := firstMissing(p); first != "" {
			c.created = append(c.created, first)
		}
	}
	defer func() {
		if retErr != nil {
			retErr = errors.Join(retErr, c.Stop(), c.Close())
		}
	}()
	if err := os.MkdirAll(workDir(opts.Dir), 0o700); err != nil {
		return nil, err
	}
	var err error
	if c.pki, err = newPKI(filepath.Join(opts.Dir, "pki")); err != nil {
		return nil, err
	}
	if !opts.RemoteNode {
		suffix := make([]byte, 3)
		_, _ = rand.Read(suffix)
		if c.cgroup, err = makeCgroupRoot("/nstarget-e2e-" + hex.EncodeToString(suffix)); err != nil {
			return nil, err
		}
	}
	etcdURL, err := c.startEtcd(ctx)
	if err != nil {
		return nil, err
	}
	server, err := c.startAPIServer(ctx, etcdURL)
	if err != nil {
		return nil, err
	}
	c.server = server
	if opts.Controllers {
		if err := c.startControllers(ctx); err != nil {
			return nil, err
		}
	}
	if opts.RemoteNode {
		return c, nil
	}
	if err := c.startKubelet(ctx, server); err != nil {
		return nil, err
	}
	return c, nil
}

// KubeletKubeconfig is where a cluster in dir writes the kubelet's
// kubeconfig (as system:node:NodeName), once its apiserver is up: known
// before Start, for a runtime started first that is to use it (the shim's
// events_kubeconfig).
func KubeletKubeconfig(dir string) string { return filepath.Join(dir, "kubelet.kubeconfig") }

// Dir is Options.Dir.
func (c *Cluster) Dir() string { return c.opts.Dir }

// CgroupRoot is the kubelet's cgroupRoot, made for this run.
func (c *Cluster) CgroupRoot() string { return c.cgroup.Name }

// KubeletVersion is what the kubelet binary says it is (e.g. "v1.35.4"),
// or its error.
func (c *Cluster) KubeletVersion() string {
	out, err := exec.Command(c.opts.Kubelet, "--version").Output()
	if err != nil {
		return fmt.Sprintf("(%s --version: %v)", c.opts.Kubelet, err)
	}
	f := strings.Fields(string(out))
	if len(f) == 0 {
		return "(" + c.opts.Kubelet + " --version says nothing)"
	}
	return f[len(f)-1]
}

// Kubeconfig is cluster-admin's kubeconfig.
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// KubeletLog is the kubelet's log file.
func (c *Cluster) KubeletLog() string { return filepath.Join(c.opts.Dir, "kubelet.log") }

// KubectlCommand is kubectl as cluster-admin, to be run by the caller.
func (c *Cluster) KubectlCommand(ctx context.Context, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, filepath.Join(c.opts.Bin, "kubectl"), append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
}

// Kubectl runs kubectl as cluster-admin and returns its standard output; an
// error carries its standard error.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := c.KubectlCommand(ctx, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// Apply creates or updates the objects of manifest (YAML or JSON).
func (c *Cluster) Apply(ctx context.Context, manifest string) error {
	path := filepath.Join(c.opts.Dir, "manifest-"+strconv.FormatInt(time.Now().UnixNano(), 36)+".yaml")
	if err := os.WriteFile(path, []byte(manifest), 0o600); err != nil {
		return err
	}
	defer os.Remove(path)
	_, err := c.Kubectl(ctx, "apply", "-f", path)
	return err
}

func (c *Cluster) startEtcd(ctx context.Context) (string, error) {
	client, peer := freePort(), freePort()
	clientURL, peerURL := "http://127.0.0.1:"+client, "http://127.0.0.1:"+peer
	p, err := c.start("etcd", c.opts.Etcd,
		"--name", "e2e",
		"--data-dir", filepath.Join(c.opts.Dir, "etcd"),
		"--listen-client-urls", clientURL, "--advertise-client-urls", clientURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "e2e="+peerURL,
		"--listen-metrics-urls", "",
	)
	if err != nil {
		return "", err
	}
	return clientURL, c.waitFor(ctx, p, "etcd to serve", func(ctx context.Context) error {
		conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", "127.0.0.1:"+client)
		if err == nil {
			conn.Close()
		}
		return err
	})
}

func (c *Cluster) startAPIServer(ctx context.Context, etcdURL string) (string, error) {
	ips := append([]net.IP{net.IPv4(127, 0, 0, 1), net.IPv4(10, 96, 0, 1)}, c.opts.ServerIPs...)
	srvCert, srvKey, err := c.pki.issue(certSpec{name: "apiserver", cn: "kube-apiserver", usage: x509ServerAuth,
		dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"}, ips: ips})
	if err != nil {
		return "", err
	}
	kcCert, kcKey, err := c.pki.issue(certSpec{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}, usage: x509ClientAuth})
	if err != nil {
		return "", err
	}
	adminCert, adminKey, err := c.pki.issue(certSpec{name: "admin", cn: "e2e-admin", orgs: []string{"system:masters"}, usage: x509ClientAuth})
	if err != nil {
		return "", err
	}
	saKey, err := c.pki.serviceAccountKey()
	if err != nil {
		return "", err
	}
	c.saKey = saKey
	port := freePort()
	server := "https://127.0.0.1:" + port
	c.kubeconfig = filepath.Join(c.opts.Dir, "admin.kubeconfig")
	if err := writeKubeconfig(c.kubeconfig, server, c.pki.CAFile(), adminCert, adminKey); err != nil {
		return "", err
	}
	p, err := c.start("kube-apiserver", filepath.Join(c.opts.Bin, "kube-apiserver"), apiserverArgs(apiserverFiles{
		etcd: etcdURL, port: port, cert: srvCert, key: srvKey, ca: c.pki.CAFile(), kubeletCert: kcCert, kubeletKey: kcKey,
		saKey: saKey, certDir: filepath.Join(c.opts.Dir, "apiserver-certs"),
	}, c.opts.Controllers)...)
	if err != nil {
		return "", err
	}
	return server, c.waitFor(ctx, p, "kube-apiserver to be ready", func(ctx context.Context) error {
		out, err := c.Kubectl(ctx, "get", "--raw", "/readyz")
		if err == nil && strings.TrimSpace(out) != "ok" {
			err = fmt.Errorf("readyz: %s", out)
		}
		return err
	})
}

// apiserverFiles are what kube-apiserver's flags name: etcd's URL, its
// port, its serving certificate and key, the CA, its client certificate
// and key for kubelets, the service-account key and its certificate dir.
type apiserverFiles struct {
	etcd, port, cert, key, ca, kubeletCert, kubeletKey, saKey, certDir string
}

// apiserverArgs are kube-apiserver's flags (controllers: Options.Controllers).
func apiserverArgs(f apiserverFiles, controllers bool) []string {
	return []string{
		"--etcd-servers", f.etcd,
		"--bind-address", "127.0.0.1", "--advertise-address", "127.0.0.1", "--secure-port", f.port,
		"--tls-cert-file", f.cert, "--tls-private-key-file", f.key,
		"--client-ca-file", f.ca,
		"--kubelet-client-certificate", f.kubeletCert, "--kubelet-client-key", f.kubeletKey,
		"--kubelet-certificate-authority", f.ca,
		"--kubelet-preferred-address-types", "Hostname",
		"--endpoint-reconciler-type", "none",
		"--service-account-issuer", "https://kubernetes.default.svc",
		"--service-account-key-file", f.saKey, "--service-account-signing-key-file", f.saKey,
		"--service-cluster-ip-range", "10.96.0.0/24",
		// as clusters run it: the kubelet's identity may do what the Node
		// authorizer and NodeRestriction let a node do, and no more
		"--authorization-mode", "Node,RBAC",
		"--enable-admission-plugins", enabledAdmission(controllers),
		disabledAdmission(controllers),
		"--allow-privileged",
		"--profiling=false",
		"--cert-dir", f.certDir,
	}
}

// enabledAdmission: NodeRestriction (not among kube-apiserver's defaults),
// and ServiceAccount where the controller manager runs.
func enabledAdmission(controllers bool) string {
	if controllers {
		return "NodeRestriction,ServiceAccount"
	}
	return "NodeRestriction"
}

// disabledAdmission keeps the ServiceAccount admission plugin off unless the
// controller manager runs: without it nothing makes the service accounts
// the plugin requires of every pod.
func disabledAdmission(controllers bool) string {
	if controllers {
		return "--disable-admission-plugins="
	}
	return "--disable-admission-plugins=ServiceAccount"
}

// startControllers starts kube-controller-manager, with the apiserver's
// service-account key (it signs the tokens of the service accounts it
// makes) and the CA it publishes in every namespace (kube-root-ca.crt, which
// the pods' token volumes mount), then kube-scheduler; each with a
// kubeconfig of its own. They are ready when the default namespace has its
// service account and the scheduler's healthz answers ok.
func (c *Cluster) startControllers(ctx context.Context) error {
	kcm, err := c.componentKubeconfig("kube-controller-manager", "system:kube-controller-manager")
	if err != nil {
		return err
	}
	p, err := c.start("kube-controller-manager", filepath.Join(c.opts.Bin, "kube-controller-manager"),
		controllerManagerArgs(kcm, c.saKey, c.pki.CAFile(), filepath.Join(c.opts.Dir, "volume-plugins"), freePort())...)
	if err != nil {
		return err
	}
	if err := c.waitFor(ctx, p, "the default service account", func(ctx context.Context) error {
		_, err := c.Kubectl(ctx, "get", "serviceaccount", "default", "--namespace", "default", "-o", "name")
		return err
	}); err != nil {
		return err
	}
	sched, err := c.componentKubeconfig("kube-scheduler", "system:kube-scheduler")
	if err != nil {
		return err
	}
	port := freePort()
	p, err = c.start("kube-scheduler", filepath.Join(c.opts.Bin, "kube-scheduler"), schedulerArgs(sched, port)...)
	if err != nil {
		return err
	}
	return c.waitFor(ctx, p, "kube-scheduler to be healthy", func(ctx context.Context) error {
		return httpOK(ctx, "https://127.0.0.1:"+port+"/healthz")
	})
}

// UserKubeconfig issues a client certificate for user (no group) and
// writes Dir/name.kubeconfig with it, for an identity RBAC knows nothing
// of until something binds it.
func (c *Cluster) UserKubeconfig(name, user string) (string, error) {
	return c.componentKubeconfig(name, user)
}

// componentKubeconfig issues a client certificate for user and writes
// Dir/name.kubeconfig with it.
func (c *Cluster) componentKubeconfig(name, user string) (string, error) {
	cert, key, err := c.pki.issue(certSpec{name: name + "-client", cn: user, usage: x509ClientAuth})
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.opts.Dir, name+".kubeconfig")
	return path, writeKubeconfig(path, c.server, c.pki.CAFile(), cert, key)
}

// controllerManagerArgs: every default controller, on 127.0.0.1, without
// leader election; no node CIDRs, no cloud; its flex-volume directory is the
// kubelet's (by default it makes /usr/libexec/kubernetes).
func controllerManagerArgs(kubeconfig, saKey, ca, volumePlugins, port string) []string {
	return []string{
		"--kubeconfig", kubeconfig,
		"--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
		"--service-account-private-key-file", saKey,
		"--root-ca-file", ca,
		// each controller under its own service account, with the
		// bootstrap RBAC roles made for it (system:controller:*)
		"--use-service-account-credentials=true",
		"--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", port,
		"--allocate-node-cidrs=false",
		"--flex-volume-plugin-dir", volumePlugins,
		"--profiling=false",
	}
}

// schedulerArgs: on 127.0.0.1, without leader election; /healthz needs no
// credentials (the default --authorization-always-allow-paths).
func schedulerArgs(kubeconfig, port string) []string {
	return []string{
		"--kubeconfig", kubeconfig,
		"--authentication-kubeconfig", kubeconfig, "--authorization-kubeconfig", kubeconfig,
		"--leader-elect=false",
		"--bind-address", "127.0.0.1", "--secure-port", port,
		"--profiling=false",
	}
}

func (c *Cluster) startKubelet(ctx context.Context, server string) error {
	root := filepath.Join(c.opts.Dir, "kubelet")
	if err := os.MkdirAll(root, 0o700); err != nil {
		return err
	}
	clientCert, clientKey, err := c.pki.issue(certSpec{name: "kubelet-client", cn: "system:node:" + NodeName, orgs: []string{"system:nodes"}, usage: x509ClientAuth})
	if err != nil {
		return err
	}
	srvCert, srvKey, err := c.pki.issue(certSpec{name: "kubelet", cn: NodeName, usage: x509ServerAuth,
		dns: []string{NodeName}, ips: []net.IP{net.IPv4(127, 0, 0, 1)}})
	if err != nil {
		return err
	}
	kubeconfig := KubeletKubeconfig(c.opts.Dir)
	if err := writeKubeconfig(kubeconfig, server, c.pki.CAFile(), clientCert, clientKey); err != nil {
		return err
	}
	c.kubeletConfig = filepath.Join(c.opts.Dir, "kubelet.yaml")
	c.kubeletSettings = kubeletSettings{
		Port: freePort(), HealthzPort: freePort(),
		CA: c.pki.CAFile(), Cert: srvCert, Key: srvKey,
		CgroupRoot: c.cgroup.Name, Runtime: c.opts.RuntimeEndpoint,
		PodLogs: filepath.Join(c.opts.Dir, "pod-logs"), VolumePlugins: filepath.Join(c.opts.Dir, "volume-plugins"),
	}
	c.kubeletArgs = kubeletArgs(c.kubeletConfig, kubeconfig, root)
	return c.runKubelet(ctx)
}

// kubeletArgs are the kubelet's flags: its configuration file, kubeconfig
// and root dir.
func kubeletArgs(config, kubeconfig, root string) []string {
	return []string{
		"--config", config,
		"--kubeconfig", kubeconfig,
		"--hostname-override", NodeName,
		"--root-dir", root,
		"--cert-dir", filepath.Join(root, "pki"),
		"--v", "2",
	}
}

// NodeConfig is what Start gives the components for opts: the flags of
// kube-apiserver, of the controllers (Options.Controllers) and of the
// kubelet (unless Options.RemoteNode), and the kubelet's configuration,
// with the run's own names (its directory, certificates, ports, cgroup,
// the runtime's socket) fixed, so that two runs configured alike give the
// same text. A key of a run the cluster configures (upstream.DirectKey)
// holds this rather than the rig's code (harness.NodeConfig likewise).
func NodeConfig(opts Options) string {
	const dir, port = "/run/nstarget-key/k", "1"
	file := func(name string) string { return filepath.Join(dir, name) }
	lines := []string{"kube-apiserver " + strings.Join(apiserverArgs(apiserverFiles{
		etcd: "http://127.0.0.1:" + port, port: port, cert: file("apiserver.crt"), key: file("apiserver.key"), ca: file("ca.crt"),
		kubeletCert: file("kubelet-client.crt"), kubeletKey: file("kubelet-client.key"), saKey: file("sa.key"), certDir: file("apiserver-certs"),
	}, opts.Controllers), " ")}
	if opts.Controllers {
		lines = append(lines,
			"kube-controller-manager "+strings.Join(controllerManagerArgs(file("kcm.kubeconfig"), file("sa.key"), file("ca.crt"), file("volume-plugins"), port), " "),
			"kube-scheduler "+strings.Join(schedulerArgs(file("sched.kubeconfig"), port), " "))
	}
	if !opts.RemoteNode {
		lines = append(lines, "kubelet "+strings.Join(kubeletArgs(file("kubelet.yaml"), file("kubelet.kubeconfig"), file("kubelet")), " "),
			kubeletConfig(kubeletSettings{
				Port: port, HealthzPort: port, CA: file("ca.crt"), Cert: file("kubelet.crt"), Key: file("kubelet.key"),
				CgroupRoot: "/nstarget-key", Runtime: "unix:///run/nstarget-key/cri.sock",
				PodLogs: file("pod-logs"), VolumePlugins: file("volume-plugins"),
			}))
	}
	return strings.Join(lines, "\n")
}

// RestartKubelet stops the kubelet by PID and starts it again with the same
// configuration but the feature gates gates (none when nil), and waits until
// it is healthy and the node Ready. The pods' containers keep running (they
// are the runtime's); the new kubelet takes over the pods it finds.
func (c *Cluster) RestartKubelet(ctx context.Context, gates map[string]bool) error {
	p := c.kubelet()
	if p == nil {
		return errors.New("cluster: no kubelet to restart")
	}
	if err := p.stop(); err != nil {
		return err
	}
	for i, q := range c.procs {
		if q == p {
			c.procs = append(c.procs[:i:i], c.procs[i+1:]...)
			break
		}
	}
	c.kubeletSettings.FeatureGates = gates
	return c.runKubelet(ctx)
}

// runKubelet writes the kubelet's configuration, starts it and waits until
// its healthz endpoint answers ok and the node is Ready. The healthz check
// is what tells a restarted kubelet from the one before: the node stays
// Ready in the apiserver while no kubelet runs (no controller manager marks
// it otherwise).
func (c *Cluster) runKubelet(ctx context.Context) error {
	if err := os.WriteFile(c.kubeletConfig, []byte(kubeletConfig(c.kubeletSettings)), 0o600); err != nil {
		return err
	}
	p, err := c.start("kubelet", c.opts.Kubelet, c.kubeletArgs...)
	if err != nil {
		return err
	}
	healthz := "http://127.0.0.1:" + c.kubeletSettings.HealthzPort + "/healthz"
	return c.waitFor(ctx, p, "the kubelet to be healthy and node "+NodeName+" Ready", func(ctx context.Context) error {
		if err := httpOK(ctx, healthz); err != nil {
			return err
		}
		ready, err := c.NodeReady(ctx)
		if err == nil && !ready {
			err = errors.New("not Ready")
		}
		return err
	})
}

// httpOK gets url and wants 200 "ok". An https url is a component's
// self-signed serving certificate on 127.0.0.1 (kube-scheduler's): not
// verified.
func httpOK(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := loopbackClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK || strings.TrimSpace(string(b)) != "ok" {
		return fmt.Errorf("GET %s: %s %q", url, resp.Status, b)
	}
	return nil
}

// NodeReady reports whether the node's Ready condition is True.
func (c *Cluster) NodeReady(ctx context.Context) (bool, error) {
	out, err := c.Kubectl(ctx, "get", "node", NodeName, "-o", "json")
	if err != nil {
		return false, err
	}
	var node struct {
		Status struct {
			Conditions []struct{ Type, Status, Message string }
		}
	}
	if err := json.Unmarshal([]byte(out), &node); err != nil {
		return false, err
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == "Ready" {
			return cond.Status == "True", nil
		}
	}
	return false, nil
}

// NodeKubeconfig returns a kubeconfig for a kubelet elsewhere (see
// Options.RemoteNode) that registers as node: its client certificate (as
// system:node:<node>) and the CA are in the file, so it can be copied to
// that machine as it is; server is the apiserver's URL as that machine
// reaches it (the port is the one on 127.0.0.1, see Server).
func (c *Cluster) NodeKubeconfig(node, server string) ([]byte, error) {
	cert, key, err := c.pki.issue(certSpec{name: "node-" + node, cn: "system:node:" + node, orgs: []string{"system:nodes"}, usage: x509ClientAuth})
	if err != nil {
		return nil, err
	}
	return kubeconfigData(server, c.pki.CAFile(), cert, key)
}

// CAFile is the cluster's CA certificate (it signs every certificate of
// the run, the kubelet's clients' included).
func (c *Cluster) CAFile() string { return c.pki.CAFile() }

// Server is the apiserver's URL on 127.0.0.1.
func (c *Cluster) Server() string { return c.server }

// Stop deletes every pod (through the kubelet, so that it stops their
// containers), then stops the kubelet, kube-apiserver and etcd by PID.
func (c *Cluster) Stop() error {
	var errs []error
	if c.kubelet() != nil && c.kubeconfig != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		if _, err := c.Kubectl(ctx, "delete", "pods", "--all", "--all-namespaces", "--grace-period=1", "--wait", "--timeout=80s"); err != nil {
			errs = append(errs, err)
		}
		cancel()
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		if err := c.procs[i].stop(); err != nil {
			errs = append(errs, err)
		}
	}
	c.procs = nil
	return errors.Join(errs...)
}

// Close removes what the cluster left outside its directory: its cgroups
// (call it after the runtime has removed its containers) and its links in
// ContainerLogsDir. It leaves Dir to the caller.
func (c *Cluster) Close() error {
	var errs []error
	// The kubelet bind-mounts its root dir on itself (to make it shared).
	errs = append(errs, harness.UnmountAll(c.opts.Dir))
	if c.cgroup != nil {
		errs = append(errs, c.cgroup.remove())
	}
	errs = append(errs, c.removeLogLinks())
	for _, p := range c.created {
		errs = append(errs, os.RemoveAll(p))
	}
	return errors.Join(errs...)
}

// Residue lists what the cluster made outside Dir that is still there.
func (c *Cluster) Residue() []string {
	var left []string
	if c.cgroup != nil {
		left = append(left, c.cgroup.left()...)
	}
	for _, p := range c.created {
		if _, err := os.Lstat(p); err == nil {
			left = append(left, p)
		}
	}
	return left
}

// firstMissing is the first of path and its parents, from the root down,
// that does not exist; "" when path exists.
func firstMissing(path string) string {
	if _, err := os.Lstat(path); err == nil {
		return ""
	}
	missing := path
	for p := filepath.Dir(path); p != "/" && p != "."; p = filepath.Dir(p) {
		if _, err := os.Lstat(p); err == nil {
			break
		}
		missing = p
	}
	return missing
}

// removeLogLinks removes the links in ContainerLogsDir that point into Dir
// (the directory itself goes with created when the run made it).
func (c *Cluster) removeLogLinks() error {
	entries, err := os.ReadDir(ContainerLogsDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		p := filepath.Join(ContainerLogsDir, e.Name())
		if dst, err := os.Readlink(p); err == nil && strings.HasPrefix(dst, c.opts.Dir+"/") {
			if err := os.Remove(p); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func (c *Cluster) kubelet() *proc {
	for _, p := range c.procs {
		if p.name == "kubelet" {
			return p
		}
	}
	return nil
}

// waitFor polls ready until it succeeds, p exits or StartTimeout passes.
func (c *Cluster) waitFor(ctx context.Context, p *proc, what string, ready func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	for {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		err := ready(pctx)
		pcancel()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited while waiting for %s: %v; log:\n%s", p.name, what, p.cmd.ProcessState, p.tail())
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s: %v; %s log:\n%s", what, err, p.name, p.tail())
		case <-time.After(250 * time.Millisecond):
		}
	}
}

var loopbackClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// FreePort is a TCP port on 127.0.0.1 that nothing listened on a moment ago.
func FreePort() string { return freePort() }

func freePort() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "0"
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}

// workDir is the components' working directory, empty at Start: whatever
// one writes relative to it stays inside the run, never in the directory
// the test was started from.
func workDir(dir string) string { return filepath.Join(dir, "cwd") }

// proc is a component process, its output in Dir/NAME.log.
type proc struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
}

func (c *Cluster) start(name, binary string, args ...string) (*proc, error) {
	logPath := filepath.Join(c.opts.Dir, name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.Command(binary, args...)
	cmd.Dir = workDir(c.opts.Dir)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, exited: make(chan struct{})}
	go func() { cmd.Wait(); close(p.exited) }()
	c.procs = append(c.procs, p)
	return p, nil
}

// stopTimeout bounds a component's graceful stop: kube-apiserver drains its
// requests first.
const stopTimeout = 60 * time.Second

// stop sends SIGTERM by PID, then SIGKILL after stopTimeout.
func (p *proc) stop() error {
	select {
	case <-p.exited:
		return nil
	default:
	}
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		if d := time.Since(start); d > 5*time.Second {
			fmt.Printf("cluster: %s took %s to stop\n", p.name, d.Round(100*time.Millisecond))
		}
		return nil
	case <-time.After(stopTimeout):
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
	return fmt.Errorf("%s did not stop within %s of SIGTERM; killed", p.name, stopTimeout)
}

func (p *proc) tail() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return string(b)
}
