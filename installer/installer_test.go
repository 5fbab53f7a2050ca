package installer

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The shims: a healthy one, a newer one, one that never becomes healthy.
const (
	shimV1  = "cri-nstarget v1"
	shimV2  = "cri-nstarget v2"
	shimBad = "cri-nstarget BAD"
)

func wantFailure(t *testing.T, err error, state string) {
	t.Helper()
	var f *Failure
	if !errors.As(err, &f) || f.State != state {
		t.Fatalf("got %v, want a %s failure", err, state)
	}
}

func (n *node) wantOn(endpoint string) {
	n.t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.endpoint != endpoint {
		n.t.Errorf("the kubelet runs on %s, want %s", n.endpoint, endpoint)
	}
	if !n.serves() {
		n.t.Errorf("nothing serves the kubelet's %s", n.endpoint)
	}
	if n.broken != "" {
		n.t.Errorf("the kubelet pointed at a socket nothing served, at %s", n.broken)
	}
}

func (n *node) count(job string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.jobs[job]
}

func (n *node) label() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.labels[LabelState]
}

func (n *node) lastEvent() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.events) == 0 {
		return ""
	}
	return n.events[len(n.events)-1]
}

func (n *node) state() State {
	n.t.Helper()
	st, err := loadState(n.root)
	if err != nil {
		n.t.Fatal(err)
	}
	return st
}

// sameTree says how the host differs from before, but for the allowed
// paths.
func sameTree(t *testing.T, before, after map[string]string, allowed ...string) {
	t.Helper()
	for _, p := range slices.Sorted(maps.Keys(after)) {
		if before[p] != after[p] || !hasKey(before, p) {
			if !slices.ContainsFunc(allowed, func(a string) bool { return strings.HasPrefix(p, a) }) {
				t.Errorf("the host's %s changed or appeared", p)
			}
		}
	}
	for p := range before {
		if !hasKey(after, p) && !slices.ContainsFunc(allowed, func(a string) bool { return strings.HasPrefix(p, a) }) {
			t.Errorf("the host's %s is gone", p)
		}
	}
}

func hasKey(m map[string]string, k string) bool { _, ok := m[k]; return ok }

var layouts = []struct {
	fixture, file, from string
}{
	{"kubeadm-flags", "var/lib/kubelet/kubeadm-flags.env", "unix:///var/run/containerd/containerd.sock"},
	{"kubeadm-config", "var/lib/kubelet/config.yaml", "unix:///var/run/containerd/containerd.sock"},
	{"config-default", "var/lib/kubelet/config.yaml", "unix:///run/containerd/containerd.sock"},
}

// TestLifecycle: install, check again, upgrade, an upgrade that is not
// healthy, then removal, on each kubelet layout.
func TestLifecycle(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.fixture, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			n := newNode(t, l.fixture)
			original := n.tree()

			if err := n.installer("v1", shimV1, nil).Install(ctx); err != nil {
				t.Fatal(err)
			}
			n.wantOn(shimSocket)
			if st := n.state(); st.Phase != PhaseDone || st.Kubelet.From != l.from || st.Kubelet.Path != "/"+l.file {
				t.Errorf("state %+v", st)
			}
			if n.label() != StateInstalled || n.lastEvent() != "Installed" || !n.shimEnabled || n.count("restart kubelet.service") != 1 {
				t.Errorf("label %q, event %q, enabled %v, kubelet restarts %d", n.label(), n.lastEvent(), n.shimEnabled, n.count("restart kubelet.service"))
			}
			cfg, err := os.ReadFile(filepath.Join(n.root, ConfigPath))
			if err != nil || !strings.Contains(string(cfg), "runtime_endpoint = '"+l.from+"'") || !strings.Contains(string(cfg), "events_kubeconfig = '/etc/kubernetes/kubelet.conf'") {
				t.Errorf("config (%v):\n%s", err, cfg)
			}

			// The same version again (the pod restarted): nothing restarts.
			if err := n.installer("v1", shimV1, nil).Install(ctx); err != nil {
				t.Fatal(err)
			}
			if n.count("restart kubelet.service") != 1 || n.count("restart "+UnitName) != 0 {
				t.Errorf("a check restarted something: %v", n.jobs)
			}

			// An upgrade: the shim restarts, the kubelet does not.
			if err := n.installer("v2", shimV2, nil).Install(ctx); err != nil {
				t.Fatal(err)
			}
			n.wantOn(shimSocket)
			if n.count("restart kubelet.service") != 1 || n.count("restart "+UnitName) != 1 || n.lastEvent() != "Upgraded" {
				t.Errorf("upgrade: jobs %v, event %s", n.jobs, n.lastEvent())
			}
			if b, _ := os.ReadFile(filepath.Join(n.root, "usr/local/bin/cri-nstarget")); string(b) != shimV2 {
				t.Errorf("installed binary %q", b)
			}

			// A new version that is not healthy: the one before comes back.
			wantFailure(t, n.installer("v3", shimBad, nil).Install(ctx), StateUpgradeBad)
			n.wantOn(shimSocket)
			if b, _ := os.ReadFile(filepath.Join(n.root, "usr/local/bin/cri-nstarget")); string(b) != shimV2 {
				t.Errorf("after a failed upgrade the binary is %q, want v2's", b)
			}
			if n.label() != StateUpgradeBad || n.lastEvent() != "UpgradeFailed" || n.count("restart kubelet.service") != 1 {
				t.Errorf("label %q, event %q, jobs %v", n.label(), n.lastEvent(), n.jobs)
			}
			restarts := n.count("restart " + UnitName)
			wantFailure(t, n.installer("v3", shimBad, nil).Install(ctx), StateUpgradeBad)
			if n.count("restart "+UnitName) != restarts {
				t.Errorf("the failed version was tried again")
			}

			// Removal: pins of running containers go, those of a
			// container still to start stay.
			n.pin("running", false)
			n.pin("tostart", true)
			if err := n.installer("v2", shimV2, nil).Remove(ctx); err != nil {
				t.Fatal(err)
			}
			n.wantOn(l.from)
			if n.count("restart kubelet.service") != 2 || n.label() != "" || n.lastEvent() != "Removed" || n.shimEnabled || n.shimLoaded {
				t.Errorf("remove: jobs %v, label %q, event %q, enabled %v loaded %v", n.jobs, n.label(), n.lastEvent(), n.shimEnabled, n.shimLoaded)
			}
			if n.mounts["/run/cri-nstarget/pins/running/pid"] || !n.mounts["/run/cri-nstarget/pins/tostart/pid"] {
				t.Errorf("mounts after removal: %v", n.mounts)
			}
			sameTree(t, original, n.tree(), "run/cri-nstarget/pins/tostart", "run/cri-nstarget/", "run/")
			if hasKey(n.tree(), "run/cri-nstarget/pins/running/pid") {
				t.Errorf("the released pin's file is left")
			}
		})
	}
}

// TestShimNotHealthy: a shim that does not become healthy is rolled back
// before the kubelet is touched, and the node is as it was but the state.
func TestShimNotHealthy(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, "kubeadm-flags")
	before := n.tree()
	wantFailure(t, n.installer("bad", shimBad, nil).Install(ctx), StateRolledBack)
	n.wantOn("unix:///var/run/containerd/containerd.sock")
	if n.count("restart kubelet.service") != 0 || n.label() != StateRolledBack || n.lastEvent() != "RolledBack" {
		t.Errorf("jobs %v, label %q, event %q", n.jobs, n.label(), n.lastEvent())
	}
	sameTree(t, before, n.tree(), "var/lib/cri-nstarget-install/")
	if st := n.state(); st.Phase != PhaseRolledBack || st.Failed != sha([]byte(shimBad)) || !strings.Contains(st.Reason, "the shim did not start") {
		t.Errorf("state %+v", st)
	}
	// Not tried again; a fixed version is.
	starts := n.count("start " + UnitName)
	wantFailure(t, n.installer("bad", shimBad, nil).Install(ctx), StateRolledBack)
	if n.count("start "+UnitName) != starts {
		t.Errorf("the failed binary was started again")
	}
	if err := n.installer("v1", shimV1, nil).Install(ctx); err != nil {
		t.Fatal(err)
	}
	n.wantOn(shimSocket)
}

// TestNotReadyThroughShim: the kubelet restarted on the shim and the node
// not Ready within the bound: the kubelet's file as it was (to the byte),
// restarted, Ready on containerd; then the shim goes.
func TestNotReadyThroughShim(t *testing.T) {
	for _, l := range layouts {
		t.Run(l.fixture, func(t *testing.T) {
			t.Parallel()
			n := newNode(t, l.fixture)
			n.notReadyViaShim = true
			before := n.tree()
			wantFailure(t, n.installer("v1", shimV1, nil).Install(context.Background()), StateRolledBack)
			n.wantOn(l.from)
			if n.count("restart kubelet.service") != 2 || n.shimActive || n.shimLoaded {
				t.Errorf("jobs %v, shim active %v loaded %v", n.jobs, n.shimActive, n.shimLoaded)
			}
			if st := n.state(); !strings.Contains(st.Reason, "was not Ready through the shim") {
				t.Errorf("reason %q", st.Reason)
			}
			sameTree(t, before, n.tree(), "var/lib/cri-nstarget-install/")
		})
	}
}

// TestRefusals: nothing on the host changes, and the node says why.
func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		desc, fixture string
		setup         func(n *node)
		want          string
	}{
		{"no --config, no flag", "no-config", nil, "neither --container-runtime-endpoint nor --config"},
		{"the flag in two places", "two-places", nil, "set it in one"},
		{"containerd not running", "kubeadm-flags", func(n *node) { n.containerdDown = true }, "containerd.service is failed"},
		{"not containerd", "kubeadm-flags", func(n *node) { n.runtimeName = "cri-o" }, "is cri-o v2.4.2: cri-nstarget runs in front of containerd"},
		{"the package's unit", "kubeadm-flags", func(n *node) {
			os.MkdirAll(filepath.Join(n.root, "usr/lib/systemd/system"), 0o755)
			os.WriteFile(filepath.Join(n.root, "usr/lib/systemd/system", UnitName), []byte("[Service]\n"), 0o644)
		}, "already installed from /usr/lib/systemd/system/cri-nstarget.service"},
		{"a binary of someone else's", "kubeadm-flags", func(n *node) {
			os.MkdirAll(filepath.Join(n.root, "usr/local/bin"), 0o755)
			os.WriteFile(filepath.Join(n.root, "usr/local/bin/cri-nstarget"), []byte("x"), 0o755)
		}, "/usr/local/bin/cri-nstarget exists and this installer did not write it"},
		{"a config for another backend", "kubeadm-flags", func(n *node) {
			os.MkdirAll(filepath.Join(n.root, "etc/cri-nstarget"), 0o755)
			os.WriteFile(filepath.Join(n.root, ConfigPath), []byte("runtime_endpoint = 'unix:///run/other.sock'\n"), 0o644)
		}, "sends the shim to unix:///run/other.sock"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			n := newNode(t, tc.fixture)
			if tc.setup != nil {
				tc.setup(n)
			}
			before := n.tree()
			err := n.installer("v1", shimV1, nil).Install(context.Background())
			wantFailure(t, err, StateRefused)
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%v, want %q", err, tc.want)
			}
			sameTree(t, before, n.tree())
			if len(n.jobs) != 0 || n.label() != StateRefused || n.lastEvent() != "InstallRefused" {
				t.Errorf("jobs %v, label %q, event %q", n.jobs, n.label(), n.lastEvent())
			}
		})
	}
}
