package installer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
)

// scenario is one run of the installer on a node set up by setup, and
// what the node must look like after it (check), however often the
// installer was killed on the way.
type scenario struct {
	name  string
	setup func(n *node)
	run   func(n *node, at func(string) bool) error
	check func(t *testing.T, n *node, err error)
}

func install(version, shim string) func(n *node, at func(string) bool) error {
	return func(n *node, at func(string) bool) error {
		in := n.installer(version, shim, at)
		defer in.Close()
		return in.Install(context.Background())
	}
}

func removal(n *node, at func(string) bool) error {
	in := n.installer("v1", shimV1, at)
	defer in.Close()
	return in.Remove(context.Background())
}

func installed(n *node) {
	if err := n.installer("v1", shimV1, nil).Install(context.Background()); err != nil {
		n.t.Fatal(err)
	}
}

const containerd = "unix:///var/run/containerd/containerd.sock"

func scenarios() []scenario {
	return []scenario{
		{name: "install", run: install("v1", shimV1), check: func(t *testing.T, n *node, err error) {
			if err != nil {
				t.Fatal(err)
			}
			n.wantOn(shimSocket)
			if st := n.state(); st.Phase != PhaseDone || n.label() != StateInstalled || n.guardLoaded() || hasKey(n.tree(), guardCopy[1:]) {
				t.Errorf("phase %s, label %s, guard loaded %v", st.Phase, n.label(), n.guardLoaded())
			}
		}},
		{name: "install, the shim not healthy", run: install("bad", shimBad), check: func(t *testing.T, n *node, err error) {
			wantFailure(t, err, StateRolledBack)
			n.wantOn(containerd)
			if n.shimLoaded || n.state().Phase != PhaseRolledBack {
				t.Errorf("shim loaded %v, state %+v", n.shimLoaded, n.state())
			}
		}},
		{name: "install, the node not Ready through the shim", setup: func(n *node) { n.notReadyViaShim = true }, run: install("v1", shimV1),
			check: func(t *testing.T, n *node, err error) {
				wantFailure(t, err, StateRolledBack)
				n.wantOn(containerd)
				if n.shimLoaded || n.shimActive {
					t.Errorf("shim loaded %v active %v", n.shimLoaded, n.shimActive)
				}
			}},
		{name: "install, the smoke test fails", setup: func(n *node) { n.smokeFails = true }, run: install("v1", shimV1),
			check: func(t *testing.T, n *node, err error) {
				wantFailure(t, err, StateRolledBack)
				n.wantOn(containerd)
				if n.shimLoaded || n.guardLoaded() || hasKey(n.tree(), guardCopy[1:]) {
					t.Errorf("shim loaded %v, guard loaded %v", n.shimLoaded, n.guardLoaded())
				}
			}},
		{name: "upgrade", setup: installed, run: install("v2", shimV2), check: func(t *testing.T, n *node, err error) {
			if err != nil {
				t.Fatal(err)
			}
			n.wantOn(shimSocket)
			if st := n.state(); st.Phase != PhaseDone || st.Version != "v2" || n.count("restart kubelet.service") != 1 {
				t.Errorf("state %+v, jobs %v", st, n.jobs)
			}
		}},
		{name: "upgrade, the new shim not healthy", setup: installed, run: install("bad", shimBad), check: func(t *testing.T, n *node, err error) {
			wantFailure(t, err, StateUpgradeBad)
			n.wantOn(shimSocket)
			if st := n.state(); st.Phase != PhaseDone || st.Version != "v1" || st.ShimSHA != sha([]byte(shimV1)) || n.count("restart kubelet.service") != 1 {
				t.Errorf("state %+v, jobs %v", st, n.jobs)
			}
		}},
		{name: "remove", setup: func(n *node) { installed(n); n.pin("running", false) }, run: removal, check: func(t *testing.T, n *node, err error) {
			if err != nil {
				t.Fatal(err)
			}
			n.wantOn(containerd)
			if n.shimLoaded || len(n.mounts) != 0 || n.label() != "" {
				t.Errorf("shim loaded %v, mounts %v, label %q", n.shimLoaded, n.mounts, n.label())
			}
			for p := range n.tree() {
				if strings.Contains(p, "cri-nstarget") {
					t.Errorf("left on the host: %s", p)
				}
			}
		}},
	}
}

// TestKilledAnywhere: for each scenario, the installer is killed at each
// point of its run in turn (each save of its state, each file written, each
// job), and started again; the node ends as after a run never killed. At
// every point, the kubelet points at nothing that does not serve, in an
// upgrade too.
func TestKilledAnywhere(t *testing.T) {
	for _, sc := range scenarios() {
		t.Run(sc.name, func(t *testing.T) {
			t.Parallel()
			n := newNode(t, "kubeadm-flags")
			if sc.setup != nil {
				sc.setup(n)
			}
			var points []string
			err := sc.run(n, func(p string) bool { points = append(points, p); return false })
			sc.check(t, n, err)
			if t.Failed() {
				return
			}
			t.Logf("%d points: %s", len(points), strings.Join(points, " "))
			for k, p := range points {
				t.Run(fmt.Sprintf("%02d-%s", k, p), func(t *testing.T) {
					t.Parallel()
					n := newNode(t, "kubeadm-flags")
					if sc.setup != nil {
						sc.setup(n)
					}
					i := 0
					err := sc.run(n, func(string) bool { i++; return i == k+1 })
					if !errors.Is(err, errCrash) {
						t.Fatalf("not killed at point %d (%s): %v", k, p, err)
					}
					err = sc.run(n, nil)
					sc.check(t, n, err)
				})
			}
		})
	}
}
