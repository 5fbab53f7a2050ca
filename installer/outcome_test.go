package installer

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// Trial is the fake node's trial of a binary: the bad shim never answers,
// others do. It checks that the trial is given containerd's sockets and
// the node's config as the installer sees them.
func (n *node) Trial(_ context.Context, spec TrialSpec) error {
	if !strings.HasPrefix(spec.RuntimeEndpoint, "unix://"+n.root+"/") || !strings.HasPrefix(spec.ContainerdAddress, n.root+"/") ||
		spec.Config != "" && !strings.HasPrefix(spec.Config, n.root+"/") {
		n.t.Errorf("trial of %+v: paths not under the host's root %s", spec, n.root)
	}
	if spec.SHA256 == sha([]byte(shimBad)) {
		return errors.New("rpc error: code = Unavailable desc = connection refused")
	}
	return nil
}

// trials counts the trials, and can make one pass that the node's would
// fail (pass: a binary that answers its trial, then fails its unit).
type trials struct {
	Trials
	n    int
	pass bool
}

func (c *trials) Trial(ctx context.Context, spec TrialSpec) error {
	c.n++
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if c.pass {
		return nil
	}
	return c.Trials.Trial(ctx, spec)
}

// unserved is an installer's at, recording each point where the shim does
// not serve while the kubelet points at it (an upgrade's points included).
func (n *node) unserved(points *[]string) func(string) bool {
	return func(p string) bool {
		n.mu.Lock()
		defer n.mu.Unlock()
		if n.endpoint == shimSocket && !n.shimHealthy() {
			*points = append(*points, p)
		}
		return false
	}
}

// TestUpgradeTrialFails: a new binary that does not answer its trial is
// never written, and the shim serving is neither stopped nor restarted:
// the node stays on the version before, labelled upgrade-failed (its pod
// Ready: Settled), and that binary is not tried again. One that answers
// its trial but fails once restarted is replaced by the one before.
func TestUpgradeTrialFails(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, "kubeadm-flags")
	installed(n)
	before := n.tree()
	var unserved []string
	in := n.installer("bad", shimBad, n.unserved(&unserved))
	tr := &trials{Trials: n}
	in.o.Trials = tr
	err := in.Install(ctx)
	wantFailure(t, err, StateUpgradeBad)
	n.wantOn(shimSocket)
	st := n.state()
	if tr.n != 1 || len(unserved) > 0 || n.count("restart cri-nstarget.service")+n.count("stop cri-nstarget.service") != 0 {
		t.Errorf("%d trials; unserved at %v; jobs %v", tr.n, unserved, n.jobs)
	}
	if st.Phase != PhaseDone || st.Version != "v1" || st.Failed != sha([]byte(shimBad)) || !Settled(n.label()) || n.label() != StateUpgradeBad || n.lastEvent() != "UpgradeFailed" {
		t.Errorf("state %+v, label %s, event %s", st, n.label(), n.lastEvent())
	}
	sameTree(t, before, n.tree(), strings.TrimPrefix(StatePath, "/"))

	in = n.installer("bad", shimBad, nil)
	in.o.Trials = tr
	wantFailure(t, in.Install(ctx), StateUpgradeBad)
	if tr.n != 1 {
		t.Errorf("the failed binary was tried again: %d trials", tr.n)
	}

	// Stopped (SIGTERM) during its trial: nothing recorded against v2.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	in = n.installer("v2", shimV2, nil)
	in.o.Trials = tr
	if err := in.Install(cctx); err == nil || errors.As(err, new(*Failure)) || n.state().Failed != sha([]byte(shimBad)) {
		t.Errorf("stopped during the trial: %v, state %+v", err, n.state())
	}

	// Answers its trial, fails once restarted: the one before comes back.
	n = newNode(t, "kubeadm-flags")
	installed(n)
	n.restartWindow = true // the one window a trial cannot close
	in = n.installer("bad2", shimBad+"2", nil)
	in.o.Trials = &trials{Trials: n, pass: true}
	wantFailure(t, in.Install(ctx), StateUpgradeBad)
	n.wantOn(shimSocket)
	if b, _ := os.ReadFile(filepath.Join(n.root, "usr/local/bin/cri-nstarget")); string(b) != shimV1 || n.state().Version != "v1" {
		t.Errorf("after a failed restart the node runs %q, state %+v", b, n.state())
	}
}

// TestUpgradeBothShimsFail: the new binary answers its trial and fails
// under the unit, and the one before, put back, fails too: the kubelet goes
// back to containerd at once (its restart waits for no slot, another
// node's slot is left alone), the node ends rolled back, and no slot is
// kept.
func TestUpgradeBothShimsFail(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, "kubeadm-flags")
	installed(n)
	n.bothFail = true
	takeSlot(t, n, "node-b")
	other, err := n.slots("node-b")
	if err != nil {
		t.Fatal(err)
	}
	held, err := other.Acquire(ctx) // node-b renews it
	if err != nil {
		t.Fatal(err)
	}
	defer held.Abandon()
	var unserved []string
	in := n.installer("v2", shimV2, n.unserved(&unserved))
	in.o.Trials = &trials{Trials: n, pass: true}
	n.mu.Lock()
	n.shimBroken = true
	n.mu.Unlock()
	done := make(chan error, 1)
	go func() { done <- in.Install(ctx) }()
	select {
	case err := <-done:
		wantFailure(t, err, StateRolledBack)
	case <-time.After(10 * time.Second):
		t.Fatal("the rollback after both shims failed waits (for the slot node-b holds?)")
	}
	n.wantOn(containerd)
	if st := n.state(); st.Phase != PhaseRolledBack || n.label() != StateRolledBack || n.lastEvent() != "RolledBack" {
		t.Errorf("state %+v, label %s, event %s", st, n.label(), n.lastEvent())
	}
	if h := slotHolder(t, n); h != "node-b" {
		t.Errorf("the slot is %q's, want node-b's", h)
	}
	// The kubelet's socket is unserved from the new binary's restart to
	// the kubelet's own restart back, never after it.
	if len(unserved) == 0 || unserved[len(unserved)-1] != "kubelet:reverted" {
		t.Errorf("unserved at %v, want the window to end at kubelet:reverted", unserved)
	}
	if n.count("restart kubelet.service") != 2 {
		t.Errorf("kubelet restarts %d, want 2 (onto the shim, back)", n.count("restart kubelet.service"))
	}
}

// down is a Cluster whose apiserver is unreachable while it is down: its
// reads and writes fail with ErrUnreachable, its Events are lost.
type down struct {
	Cluster
	mu          sync.Mutex
	from, until time.Time
	reads       int // Ready calls while down
}

func (d *down) isDown() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := time.Now()
	return !d.from.IsZero() && now.After(d.from) && now.Before(d.until)
}

func (d *down) Ready(ctx context.Context) (bool, time.Time, error) {
	if d.isDown() {
		d.mu.Lock()
		d.reads++
		d.mu.Unlock()
		return false, time.Time{}, fmt.Errorf("get node n1: %w: dial tcp 10.96.0.1:443: connect: connection refused", ErrUnreachable)
	}
	return d.Cluster.Ready(ctx)
}

func (d *down) SetState(ctx context.Context, state, detail string) error {
	if d.isDown() {
		return fmt.Errorf("label node n1: %w", ErrUnreachable)
	}
	return d.Cluster.SetState(ctx, state, detail)
}

func (d *down) Event(ctx context.Context, warning bool, reason, message string) {
	if !d.isDown() {
		d.Cluster.Event(ctx, warning, reason, message)
	}
}

// TestAPIServerDown: the apiserver unreachable from the kubelet's restart
// for three times the ready wait: a healthy install pauses and ends
// installed (no rollback, no failed); a node not Ready through the shim
// is still rolled back, on the answer once the apiserver is back.
func TestAPIServerDown(t *testing.T) {
	for _, notReady := range []bool{false, true} {
		t.Run(fmt.Sprintf("notReadyViaShim=%v", notReady), func(t *testing.T) {
			n := newNode(t, "kubeadm-flags")
			n.notReadyViaShim = notReady
			d := &down{Cluster: n}
			in := n.installer("v1", shimV1, func(p string) bool {
				if p == "kubelet:restarted" && d.from.IsZero() {
					d.mu.Lock()
					d.from, d.until = time.Now(), time.Now().Add(3*in0ReadyTimeout)
					d.mu.Unlock()
				}
				return false
			})
			in.o.Cluster = d
			err := in.Install(context.Background())
			if d.reads == 0 || time.Now().Before(d.until) {
				t.Fatalf("the apiserver was never down while the installer waited (%d reads, until %s)", d.reads, d.until)
			}
			if notReady {
				wantFailure(t, err, StateRolledBack)
				n.wantOn(containerd)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n.wantOn(shimSocket)
			if n.state().Phase != PhaseDone || n.label() != StateInstalled || n.count("restart kubelet.service") != 1 {
				t.Errorf("state %+v, label %s, jobs %v", n.state(), n.label(), n.jobs)
			}
		})
	}
}

// in0ReadyTimeout is the fake installers' ReadyTimeout.
const in0ReadyTimeout = 500 * time.Millisecond

// TestFailedRetried: a rollback that failed (containerd down as the
// kubelet came back onto it) leaves the node failed, not settled; tried
// again once containerd is back, the rollback is finished; tried again
// after that, the rolled-back binary is not installed again (a new one
// is).
func TestFailedRetried(t *testing.T) {
	ctx := context.Background()
	n := newNode(t, "kubeadm-flags")
	n.notReadyViaShim = true
	err := n.installer("v1", shimV1, func(p string) bool {
		if p == "kubelet:reverted" {
			n.mu.Lock()
			n.containerdDown = true
			n.mu.Unlock()
		}
		return false
	}).Install(ctx)
	wantFailure(t, err, StateFailed)
	if Settled(n.label()) || n.label() != StateFailed {
		t.Fatalf("label %s", n.label())
	}
	n.mu.Lock()
	n.containerdDown = false
	n.mu.Unlock()
	wantFailure(t, n.installer("v1", shimV1, nil).Install(ctx), StateRolledBack)
	n.wantOn(containerd)
	if n.shimLoaded || n.label() != StateRolledBack {
		t.Errorf("after the retry: shim loaded %v, label %s", n.shimLoaded, n.label())
	}
	restarts := n.count("restart kubelet.service")
	wantFailure(t, n.installer("v1", shimV1, nil).Install(ctx), StateRolledBack)
	if n.count("restart kubelet.service") != restarts || n.shimLoaded {
		t.Errorf("the rolled-back binary was installed again: jobs %v", n.jobs)
	}
	n.notReadyViaShim = false
	if err := n.installer("v2", shimV2, nil).Install(ctx); err != nil {
		t.Fatalf("a new version after a rollback: %v", err)
	}
	n.wantOn(shimSocket)
}

// TestVersionMismatchOnResume: v1's install killed at each of its points,
// then v2's installer: the node ends on v2, its record saying v2 and the
// sha256 of each file as it is on the host, Installed v2; the kubelet never
// on a socket nothing serves, and restarted once at most.
func TestVersionMismatchOnResume(t *testing.T) {
	var points []string
	first := newNode(t, "kubeadm-flags")
	if err := first.installer("v1", shimV1, func(p string) bool { points = append(points, p); return false }).Install(context.Background()); err != nil {
		t.Fatal(err)
	}
	for k, p := range points {
		t.Run(fmt.Sprintf("%02d-%s", k, p), func(t *testing.T) {
			t.Parallel()
			n := newNode(t, "kubeadm-flags")
			i := 0
			err := n.installer("v1", shimV1, func(string) bool { i++; return i == k+1 }).Install(context.Background())
			if !errors.Is(err, errCrash) {
				t.Fatalf("not killed at %s: %v", p, err)
			}
			in := n.installer("v2", shimV2, nil)
			if err := in.Install(context.Background()); err != nil {
				t.Fatal(err)
			}
			n.wantOn(shimSocket)
			st := n.state()
			v, _ := in.Installed()
			if st.Phase != PhaseDone || st.Version != "v2" || st.ShimSHA != sha([]byte(shimV2)) || v != "v2" || n.label() != StateInstalled {
				t.Errorf("state %s %s, Installed %q, label %s", st.Phase, st.Version, v, n.label())
			}
			for _, c := range st.Created {
				if now, _ := fileSHA(n.root, c.Path); !c.Dir && now != c.SHA256 {
					t.Errorf("%s: recorded %.12s, on the host %.12s", c.Path, c.SHA256, now)
				}
			}
			if r := n.count("restart kubelet.service"); r > 1 {
				t.Errorf("the kubelet restarted %d times", r)
			}
		})
	}
}
