package installer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cri-nstarget/cri-nstarget/installer/kubelet"
	"github.com/cri-nstarget/cri-nstarget/installer/slots"
)

// node is a fake node for the installer: a host root in a directory (the
// kubelet's files from a fixture of package kubelet), and in memory its
// systemd, its kubelet, the shim, containerd's CRI, its mounts and its Node
// in the apiserver. The kubelet it restarts reads its files as systemd
// would start it (kubeadm's unit: KUBELET_KUBEADM_ARGS and
// KUBELET_EXTRA_ARGS after its fixed flags); it is Ready once it has
// reported a status after its start, when its runtime endpoint serves.
type node struct {
	t    *testing.T
	root string
	unit kubelet.Unit
	base []string // the kubelet's fixed flags
	// leases are the cluster's, shared by every installer of the test.
	leases *fake.Clientset

	mu sync.Mutex
	// kubelet
	pid      int
	argv     []string
	endpoint string // what the running kubelet read at its start
	started  time.Time
	// shim
	shimLoaded, shimEnabled, shimActive bool
	// faults
	containerdDown  bool   // containerd.service not active
	runtimeName     string // CRI Version's name; default containerd
	notReadyViaShim bool   // the node is never Ready through the shim
	apiDown         bool   // the apiserver answers nothing (the Node, the Leases)
	smokeFails      bool   // the shim cannot create containers
	shimBroken      bool   // no shim binary is healthy here (its state dir, say)
	onSmoke         func() // called as a smoke test runs (mu not held)
	smokes          int
	// the host's guard: the timer's units as started (nil: not loaded),
	// whether it fired, and its own timer when it fires by itself
	guard      *Timer
	guardFired bool
	guardClock *time.Timer
	// Node
	labels map[string]string
	events []string
	// CRI, mounts
	created map[string]bool
	mounts  map[string]bool
	// counts of systemd jobs, by "verb unit"
	jobs map[string]int
	// broken is the first time the kubelet pointed at a socket nothing
	// served, seen at a point of the installer.
	broken string
	// restartWindow accepts the one window an upgrade cannot close: a new
	// binary that answered its trial and then failed under the unit leaves
	// the socket unserved until the one before is restarted (upgrade:
	// points only). Set by the test of that case alone.
	restartWindow bool
	// bothFail accepts the window of an upgrade whose new and previous
	// binaries both fail, until the kubelet is back on its own endpoint.
	bothFail bool
}

const shimSocket = "unix:///run/cri-nstarget/cri.sock"

// newNode copies ../kubelet/testdata/FIXTURE's root and starts its kubelet.
func newNode(t *testing.T, fixture string) *node {
	t.Helper()
	n := &node{t: t, root: t.TempDir(), leases: fake.NewClientset(), labels: map[string]string{},
		created: map[string]bool{}, mounts: map[string]bool{}, jobs: map[string]int{}, runtimeName: "containerd"}
	n.leases.PrependReactor("*", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.apiDown {
			return true, nil, errApiserverDown
		}
		return false, nil, nil
	})
	t.Cleanup(func() {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.guardClock != nil {
			n.guardClock.Stop()
		}
	})
	src := filepath.Join("kubelet", "testdata", fixture)
	if err := os.CopyFS(n.root, os.DirFS(filepath.Join(src, "root"))); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(src, "unit.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &n.unit); err != nil {
		t.Fatal(err)
	}
	b, err = os.ReadFile(filepath.Join(src, "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	// The fixed flags are the fixture's command line up to what the
	// environment files add.
	for _, a := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if strings.HasPrefix(a, "--container-runtime-endpoint") || strings.HasPrefix(a, "--pod-infra") || strings.HasPrefix(a, "--node-ip") {
			break
		}
		n.base = append(n.base, a)
	}
	n.startKubelet()
	return n
}

// env reads VAR=VALUE (VALUE maybe double-quoted) from the host's file.
func (n *node) env(file, name string) []string {
	b, err := os.ReadFile(filepath.Join(n.root, file))
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, name+"="); ok {
			return strings.Fields(strings.Trim(v, `"`))
		}
	}
	return nil
}

// startKubelet starts the kubelet anew, reading its files (mu held or not
// needed).
func (n *node) startKubelet() {
	n.pid += 100
	n.argv = append(append(append([]string(nil), n.base...), n.env("/var/lib/kubelet/kubeadm-flags.env", "KUBELET_KUBEADM_ARGS")...),
		n.env("/etc/default/kubelet", "KUBELET_EXTRA_ARGS")...)
	proc := filepath.Join(n.root, "proc", strconv.Itoa(n.pid))
	if err := os.MkdirAll(proc, 0o755); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(proc, "cmdline"), []byte(strings.Join(n.argv, "\x00")+"\x00"), 0o444); err != nil {
		n.t.Fatal(err)
	}
	kn, err := kubelet.Read(n.root, n.argv, n.unit)
	if err != nil {
		n.t.Fatal(err)
	}
	n.endpoint, n.started = kubelet.DefaultEndpoint, time.Now()
	if l, err := kubelet.Find(kn); err == nil {
		n.endpoint = l.Endpoint
	}
}

func (n *node) shimHealthy() bool {
	b, err := os.ReadFile(filepath.Join(n.root, "usr/local/bin/cri-nstarget"))
	return n.shimActive && err == nil && !bytes.Contains(b, []byte("BAD")) && !n.shimBroken
}

// serves says whether the kubelet's endpoint answers.
func (n *node) serves() bool {
	if n.endpoint == shimSocket {
		return n.shimHealthy()
	}
	return !n.containerdDown
}

func (n *node) Unit(_ context.Context, name string) (Unit, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	switch name {
	case "kubelet.service":
		return Unit{LoadState: "loaded", ActiveState: "active", MainPID: n.pid, Files: n.unit}, nil
	case "containerd.service":
		if n.containerdDown {
			return Unit{LoadState: "loaded", ActiveState: "failed"}, nil
		}
		return Unit{LoadState: "loaded", ActiveState: "active", MainPID: 7}, nil
	case GuardTimer:
		if n.guard == nil {
			return Unit{LoadState: "not-found", ActiveState: "inactive"}, nil
		}
		return Unit{LoadState: "loaded", ActiveState: "active"}, nil
	case UnitName:
		if !n.shimLoaded {
			if _, err := os.Stat(filepath.Join(n.root, "usr/lib/systemd/system", UnitName)); err == nil {
				return Unit{LoadState: "loaded", ActiveState: "inactive", Files: kubelet.Unit{FragmentPath: "/usr/lib/systemd/system/" + UnitName}}, nil
			}
			return Unit{LoadState: "not-found", ActiveState: "inactive"}, nil
		}
		state := "inactive"
		if n.shimActive {
			state = "active"
		}
		return Unit{LoadState: "loaded", ActiveState: state, MainPID: 9, Files: kubelet.Unit{FragmentPath: UnitPath}}, nil
	}
	return Unit{LoadState: "not-found", ActiveState: "inactive"}, nil
}

func (n *node) job(verb, name string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.jobs[verb+" "+name]++
	switch name {
	case "kubelet.service":
		if verb == "restart" {
			n.startKubelet()
		}
		return nil
	case GuardTimer:
		if n.guard == nil || verb != "stop" {
			return fmt.Errorf("unit %s not loaded", name)
		}
		n.guard = nil // stopped: unloaded, as a transient unit is
		if n.guardClock != nil {
			n.guardClock.Stop()
		}
		return nil
	case UnitName:
		if !n.shimLoaded {
			return fmt.Errorf("unit %s not found", name)
		}
		switch verb {
		case "start", "restart":
			if verb == "start" && n.shimActive {
				return nil
			}
			n.shimActive = true
			if !n.shimHealthy() {
				n.shimActive = false
				return errors.New(`job "failed"`)
			}
		case "stop":
			n.shimActive = false
		}
		return nil
	}
	return fmt.Errorf("unit %s not found", name)
}

func (n *node) Start(_ context.Context, name string) error   { return n.job("start", name) }
func (n *node) Restart(_ context.Context, name string) error { return n.job("restart", name) }
func (n *node) Stop(_ context.Context, name string) error    { return n.job("stop", name) }

// StartTimer loads the guard's timer as systemd does a transient unit: an
// error when one of the name is loaded; it fires by itself after t.After.
func (n *node) StartTimer(_ context.Context, t Timer) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.jobs["start "+t.Name]++
	if t.Name != GuardTimer || t.Service != GuardService {
		return fmt.Errorf("unexpected timer %s/%s", t.Name, t.Service)
	}
	if n.guard != nil {
		return fmt.Errorf("unit %s was already loaded or has a fragment file", t.Name)
	}
	n.guard = &t
	armed := &t
	n.guardClock = time.AfterFunc(t.After, func() { n.fireGuard(armed) })
	return nil
}

func (n *node) ResetFailed(_ context.Context, name string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.jobs["reset-failed "+name]++
	return nil
}

// fireGuard runs the armed guard's service as systemd would, its commands
// against the host's root: the installer plays no part. armed, when not
// nil, is the guard expected (a timer stopped since does not fire).
func (n *node) fireGuard(armed *Timer) {
	n.mu.Lock()
	g := n.guard
	if g == nil || armed != nil && g != armed {
		n.mu.Unlock()
		return
	}
	n.guardFired = true
	n.mu.Unlock()
	for _, c := range g.Commands {
		if err := n.runHost(c); err != nil {
			n.t.Errorf("the guard's %q: %v", c, err)
			return
		}
	}
}

// runHost runs one of the host binaries the guard may use.
func (n *node) runHost(c []string) error {
	host := func(p string) string { return filepath.Join(n.root, p) }
	switch {
	case len(c) == 4 && c[0] == "/bin/cp" && c[1] == "-p":
		b, err := os.ReadFile(host(c[2]))
		if err != nil {
			return err
		}
		fi, err := os.Stat(host(c[2]))
		if err != nil {
			return err
		}
		return os.WriteFile(host(c[3]), b, fi.Mode().Perm())
	case len(c) == 4 && c[0] == "/bin/mv" && c[1] == "-f":
		return os.Rename(host(c[2]), host(c[3]))
	case len(c) == 2 && c[0] == "/bin/systemctl" && c[1] == "daemon-reload":
		return n.Reload(context.Background())
	case len(c) == 3 && c[0] == "/bin/systemctl" && c[1] == "restart":
		return n.job("restart", c[2])
	}
	return fmt.Errorf("not a command of the guard's: %q", c)
}

func (n *node) Enable(_ context.Context, name string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if name != UnitName || !n.shimLoaded {
		return fmt.Errorf("enable %s: not loaded", name)
	}
	n.shimEnabled = true
	return nil
}

func (n *node) Disable(_ context.Context, name string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.shimEnabled = false
	return nil
}

func (n *node) Reload(context.Context) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.jobs["daemon-reload"]++
	_, err := os.Stat(filepath.Join(n.root, UnitPath))
	n.shimLoaded = err == nil
	if !n.shimLoaded {
		n.shimActive, n.shimEnabled = false, false
	}
	return nil
}

// Ready: the kubelet has reported a status since its start, stamped (at
// the apiserver's precision, seconds) with the whole second after it, as a
// real one does seconds after; Ready when its endpoint serves.
func (n *node) Ready(context.Context) (bool, time.Time, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.apiDown {
		return false, time.Time{}, errApiserverDown
	}
	hb := n.started.Truncate(time.Second).Add(time.Second)
	ready := n.serves() && !(n.endpoint == shimSocket && n.notReadyViaShim)
	return ready, hb, nil
}

func (n *node) SetState(_ context.Context, state, detail string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.apiDown {
		return errApiserverDown
	}
	if state == "" {
		delete(n.labels, LabelState)
	} else {
		n.labels[LabelState] = state
	}
	return nil
}

func (n *node) Event(_ context.Context, warning bool, reason, message string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.apiDown {
		return
	}
	n.events = append(n.events, reason)
}

func (n *node) Serving(_ context.Context, socket string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if socket == filepath.Join(n.root, "/run/cri-nstarget/cri.sock") && n.shimHealthy() {
		return nil
	}
	return fmt.Errorf("%s: connection refused", socket)
}

// Smoke passes through a healthy shim that can create containers, its
// container in the installer's own pod.
func (n *node) Smoke(_ context.Context, socket, podUID, image string, command []string) error {
	if n.onSmoke != nil {
		n.onSmoke()
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	n.smokes++
	switch {
	case socket != filepath.Join(n.root, "/run/cri-nstarget/cri.sock") || image != smokeImage || len(command) == 0 || podUID != ownPod:
		return fmt.Errorf("smoke test on %s in pod %s with %s %q", socket, podUID, image, command)
	case !n.shimHealthy():
		return fmt.Errorf("%s: connection refused", socket)
	case n.smokeFails:
		return errors.New("rpc error: code = Unknown desc = failed to create containerd task")
	}
	return nil
}

// ImageOf finds the installer's pod (ownPod) running through the shim,
// from smokeImage.
func (n *node) ImageOf(_ context.Context, socket, podUID string) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if podUID != ownPod || socket != filepath.Join(n.root, "/run/cri-nstarget/cri.sock") || !n.shimHealthy() {
		return "", fmt.Errorf("no running container of pod %s on %s", podUID, socket)
	}
	return smokeImage, nil
}

func (n *node) Runtime(_ context.Context, socket string) (string, string, error) {
	if !strings.HasPrefix(socket, n.root) || !strings.HasSuffix(socket, "containerd.sock") {
		return "", "", fmt.Errorf("%s: no such socket", socket)
	}
	return n.runtimeName, "v2.4.2", nil
}

func (n *node) Created(context.Context, string) (map[string]bool, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := map[string]bool{}
	for k, v := range n.created {
		out[k] = v
	}
	return out, nil
}

func (n *node) Under(dir string) ([]string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for m := range n.mounts {
		if strings.HasPrefix(m, dir+"/") {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out, nil
}

func (n *node) Unmount(p string) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.mounts[p] {
		return fmt.Errorf("%s: not mounted", p)
	}
	delete(n.mounts, p)
	return nil
}

// pin makes a pin of container id, as the shim does.
func (n *node) pin(id string, created bool) {
	p := "/run/cri-nstarget/pins/" + id + "/pid"
	if err := os.MkdirAll(filepath.Join(n.root, path.Dir(p)), 0o700); err != nil {
		n.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(n.root, p), nil, 0o600); err != nil {
		n.t.Fatal(err)
	}
	n.mu.Lock()
	n.mounts[p] = true
	n.created[id] = created
	n.mu.Unlock()
}

// check is called at every point of the installer: the kubelet never
// points at a socket nothing serves.
func (n *node) check(point string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	// No step is exempt, an upgrade's neither, but for restartWindow.
	if n.restartWindow && strings.HasPrefix(point, "upgrade:") {
		return
	}
	// Both shims failed: nothing can serve the shim's socket until the
	// kubelet's restart onto its own endpoint (its test bounds that window).
	if n.bothFail {
		return
	}
	if n.endpoint == shimSocket && !n.shimActive && n.broken == "" {
		n.broken = point
	}
}

// installer is a new installer process on n, for the shim binary shim:
// every point of its run is passed to at, which says whether the process
// is killed there.
func (n *node) installer(version, shim string, at func(point string) bool) *Installer {
	n.t.Helper()
	log := logrus.New()
	log.SetOutput(testWriter{n.t})
	s, err := n.slots("node-a")
	if err != nil {
		n.t.Fatal(err)
	}
	in, err := New(Options{
		Root: n.root, Version: version, Shim: []byte(shim), UnitTemplate: []byte("[Service]\nExecStart=@BINDIR@/cri-nstarget --config @SYSCONFDIR@/cri-nstarget/config.toml\n"),
		HealthTimeout: 300 * time.Millisecond, ReadyTimeout: 500 * time.Millisecond, Poll: 20 * time.Millisecond,
		NotReadyGrace: 200 * time.Millisecond, GuardAfter: time.Minute, SmokeImage: smokeImage, PodUID: ownPod,
		Systemd: n, Cluster: n, CRI: n, Mounts: n, Slots: s, Log: log, Trials: n,
	})
	if err != nil {
		n.t.Fatal(err)
	}
	in.crash = func(point string) bool {
		n.check(point)
		return at != nil && at(point)
	}
	return in
}

// slots are the cluster's restart slots as holder sees them: one slot,
// renewed often, expiring after 2s unrenewed.
func (n *node) slots(holder string) (*slots.Slots, error) {
	return slots.New(slots.Options{Leases: n.leases.CoordinationV1().Leases("cri-nstarget"), Prefix: "cri-nstarget-install",
		Count: 1, Holder: holder, Retry: 10 * time.Millisecond, Renew: 10 * time.Millisecond, Duration: 2 * time.Second})
}

const smokeImage = "registry.example/cri-nstarget:v1"

// ownPod is the installer's pod's uid on the fake node.
const ownPod = "0b4c5e7e-1111-4a2b-9c3d-5e6f7a8b9c0d"

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(b), "\n"))
	return len(b), nil
}

// tree is every file under the node's root with its content's hash, but
// /proc: what the host looks like.
func (n *node) tree() map[string]string {
	out := map[string]string{}
	err := filepath.WalkDir(n.root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(n.root, p)
		if rel == "proc" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			out[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		out[rel] = sha(b)
		return nil
	})
	if err != nil {
		n.t.Fatal(err)
	}
	return out
}

// errApiserverDown is what the fake apiserver answers while down: no
// answer, as package cluster tells it apart (ErrUnreachable).
var errApiserverDown = fmt.Errorf("the apiserver: connection refused: %w", ErrUnreachable)
