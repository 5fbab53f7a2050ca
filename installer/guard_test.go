package installer

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// killedAt runs an install of v1 on n that is killed at point.
func killedAt(t *testing.T, n *node, point string) {
	t.Helper()
	in := n.installer("v1", shimV1, func(p string) bool { return p == point })
	err := in.Install(context.Background())
	in.Close()
	if !errors.Is(err, errCrash) {
		t.Fatalf("not killed at %s: %v", point, err)
	}
}

// kubeletFile is the fixture's file that sets the endpoint.
const kubeletFile = "var/lib/kubelet/kubeadm-flags.env"

func (n *node) read(p string) string {
	n.t.Helper()
	b, err := os.ReadFile(filepath.Join(n.root, p))
	if err != nil {
		n.t.Fatal(err)
	}
	return string(b)
}

func (n *node) guardLoaded() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.guard != nil
}

// TestGuardWithoutInstaller: the installer dies right after the kubelet's
// restart onto a shim that cannot create containers (so no installer pod
// comes back through it); the host's guard alone puts the kubelet's file
// back, byte for byte, and restarts the kubelet onto containerd. The next
// installer rolls the rest back.
func TestGuardWithoutInstaller(t *testing.T) {
	n := newNode(t, "kubeadm-flags")
	n.smokeFails = true
	before := n.read(kubeletFile)
	killedAt(t, n, "kubelet:restarted")
	n.wantOn(shimSocket)
	if !n.guardLoaded() {
		t.Fatal("no guard armed on the host")
	}
	restarts := n.count("restart kubelet.service")
	n.fireGuard(nil) // GuardAfter passed, no installer
	if got := n.read(kubeletFile); got != before {
		t.Errorf("the guard left %s as\n%s\nwant\n%s", kubeletFile, got, before)
	}
	if n.count("restart kubelet.service") != restarts+1 {
		t.Errorf("the guard did not restart the kubelet: %v", n.jobs)
	}
	n.wantOn(containerd)
	if _, err := os.Stat(filepath.Join(n.root, kubeletFile+".cri-nstarget-guard")); err == nil {
		t.Error("the guard's copy is left beside the kubelet's file")
	}

	err := n.installer("v1", shimV1, nil).Install(context.Background())
	wantFailure(t, err, StateRolledBack)
	if !strings.Contains(err.Error(), "the host's guard put") {
		t.Errorf("reason %v", err)
	}
	n.wantOn(containerd)
	if n.shimLoaded || n.guardLoaded() || n.read(kubeletFile) != before {
		t.Errorf("shim loaded %v, guard loaded %v", n.shimLoaded, n.guardLoaded())
	}
}

// TestGuardFiresMidDecision: the guard fires while the installer runs its
// smoke test, after the node was Ready through the shim: the node is not
// reported installed, but rolled back.
func TestGuardFiresMidDecision(t *testing.T) {
	n := newNode(t, "kubeadm-flags")
	n.onSmoke = func() { n.fireGuard(nil) }
	err := n.installer("v1", shimV1, nil).Install(context.Background())
	wantFailure(t, err, StateRolledBack)
	if !strings.Contains(err.Error(), "before the install was confirmed") {
		t.Errorf("reason %v", err)
	}
	n.wantOn(containerd)
	if n.shimLoaded || n.guardLoaded() || n.label() != StateRolledBack {
		t.Errorf("shim loaded %v, guard loaded %v, label %q", n.shimLoaded, n.guardLoaded(), n.label())
	}
}

// TestGuardArmedAgain: a guard left loaded by an earlier run (killed just
// after arming it) is stopped and started again, not refused; the install
// ends with no guard loaded, and arming happened before each restart onto
// the shim.
func TestGuardArmedAgain(t *testing.T) {
	n := newNode(t, "kubeadm-flags")
	killedAt(t, n, "guard:armed")
	if !n.guardLoaded() {
		t.Fatal("no guard armed")
	}
	if err := n.installer("v1", shimV1, nil).Install(context.Background()); err != nil {
		t.Fatal(err)
	}
	n.wantOn(shimSocket)
	if n.guardLoaded() || n.count("start "+GuardTimer) != 2 || n.count("stop "+GuardTimer) != 2 {
		t.Errorf("guard loaded %v, jobs %v", n.guardLoaded(), n.jobs)
	}
	if _, err := os.Stat(filepath.Join(n.root, guardCopy)); err == nil {
		t.Errorf("%s is left after the install", guardCopy)
	}
}

// TestSmokeFails: a shim Ready by the node's condition but that cannot
// create a container is rolled back.
func TestSmokeFails(t *testing.T) {
	n := newNode(t, "kubeadm-flags")
	n.smokeFails = true
	before := n.tree()
	err := n.installer("v1", shimV1, nil).Install(context.Background())
	wantFailure(t, err, StateRolledBack)
	if !strings.Contains(err.Error(), "the smoke test through the shim failed") {
		t.Errorf("reason %v", err)
	}
	n.wantOn(containerd)
	if n.smokes != 1 || n.count("restart kubelet.service") != 2 || n.guardLoaded() {
		t.Errorf("smokes %d, jobs %v, guard loaded %v", n.smokes, n.jobs, n.guardLoaded())
	}
	sameTree(t, before, n.tree(), "var/lib/cri-nstarget-install/")
}

// TestSmokeOwnImage: without --smoke-image, the smoke test runs the image
// of the installer's own pod, as the shim lists it; a pod the shim does not
// list (a wrong uid) fails it, and the install rolls back.
func TestSmokeOwnImage(t *testing.T) {
	for _, uid := range []string{ownPod, "not-this-pod"} {
		n := newNode(t, "kubeadm-flags")
		in := n.installer("v1", shimV1, nil)
		in.o.SmokeImage, in.o.PodUID = "", uid
		err := in.Install(context.Background())
		switch {
		case uid == ownPod && (err != nil || n.smokes != 1):
			t.Errorf("pod %s: %v after %d smoke tests, want installed after 1", uid, err, n.smokes)
		case uid == ownPod:
			n.wantOn(shimSocket)
		default:
			wantFailure(t, err, StateRolledBack)
			if !strings.Contains(err.Error(), "the installer's own image, through the shim") || n.smokes != 0 {
				t.Errorf("pod %s: %v after %d smoke tests", uid, err, n.smokes)
			}
			n.wantOn(containerd)
		}
	}
}

// TestNotReadyThroughShimEarly: the kubelet on the shim reports the node
// NotReady: rolled back after NotReadyGrace, long before ReadyTimeout.
func TestNotReadyThroughShimEarly(t *testing.T) {
	n := newNode(t, "kubeadm-flags")
	n.notReadyViaShim = true
	in := n.installer("v1", shimV1, nil)
	in.o.ReadyTimeout, in.o.NotReadyGrace = 30*time.Second, 300*time.Millisecond
	start := time.Now()
	err := in.Install(context.Background())
	took := time.Since(start)
	wantFailure(t, err, StateRolledBack)
	if !strings.Contains(err.Error(), "reported the node NotReady through the shim for") || took > 5*time.Second {
		t.Errorf("after %s: %v", took, err)
	}
	n.wantOn(containerd)
}

// TestApiserverAway: the apiserver away after the kubelet's restart for
// longer than the ReadyTimeout is waited out, a pause (a healthy install
// ends installed; the host's guard bounds the wait); away for good during
// a rollback, the rollback still ends rolled back, not failed.
func TestApiserverAway(t *testing.T) {
	n := newNode(t, "kubeadm-flags")
	in := n.installer("v1", shimV1, func(p string) bool {
		if p == "kubelet:restarted" {
			n.mu.Lock()
			n.apiDown = true
			n.mu.Unlock()
			time.AfterFunc(1500*time.Millisecond, func() { n.mu.Lock(); n.apiDown = false; n.mu.Unlock() })
		}
		return false
	})
	in.o.ReadyTimeout = time.Second
	if err := in.Install(context.Background()); err != nil {
		t.Fatalf("the apiserver away for 1.5s, past the ReadyTimeout of 1s: %v", err)
	}
	n.wantOn(shimSocket)

	n = newNode(t, "kubeadm-flags")
	n.notReadyViaShim = true
	err := n.installer("v1", shimV1, func(p string) bool {
		if p == "state:rolling-back" {
			n.mu.Lock()
			n.apiDown = true
			n.mu.Unlock()
		}
		return false
	}).Install(context.Background())
	wantFailure(t, err, StateRolledBack)
	n.wantOn(containerd)
}

// TestRollbackSlotElsewhere: the installer dies after the kubelet's restart
// onto a shim the node is not Ready through; its slot expires and another
// node takes it. The next installer rolls back without waiting for a slot,
// and leaves the other node's slot alone.
func TestRollbackSlotElsewhere(t *testing.T) {
	n := newNode(t, "kubeadm-flags")
	n.notReadyViaShim = true
	killedAt(t, n, "kubelet:restarted")
	takeSlot(t, n, "node-b")
	other, err := n.slots("node-b")
	if err != nil {
		t.Fatal(err)
	}
	held, err := other.Acquire(context.Background()) // node-b renews it
	if err != nil {
		t.Fatal(err)
	}
	defer held.Abandon()

	done := make(chan error, 1)
	go func() { done <- n.installer("v1", shimV1, nil).Install(context.Background()) }()
	select {
	case err := <-done:
		wantFailure(t, err, StateRolledBack)
	case <-time.After(10 * time.Second):
		t.Fatal("the rollback waits for the slot node-b holds")
	}
	n.wantOn(containerd)
	if h := slotHolder(t, n); h != "node-b" {
		t.Errorf("the slot is %q's, want node-b's", h)
	}
}

// takeSlot makes holder the slot's holder, as another node that took it.
func takeSlot(t *testing.T, n *node, holder string) {
	t.Helper()
	leases := n.leases.CoordinationV1().Leases("cri-nstarget")
	l, err := leases.Get(context.Background(), "cri-nstarget-install-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now := metav1.NewMicroTime(time.Now())
	l.Spec.HolderIdentity, l.Spec.RenewTime = &holder, &now
	if _, err := leases.Update(context.Background(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func slotHolder(t *testing.T, n *node) string {
	t.Helper()
	l, err := n.leases.CoordinationV1().Leases("cri-nstarget").Get(context.Background(), "cri-nstarget-install-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestLeaseLost: the slot taken by another node after this one took it
// (its renewals cut off for longer than the lease): the install stops
// before the kubelet is touched, with an error to retry, not a failure;
// started again once the slot is free, it installs.
func TestLeaseLost(t *testing.T) {
	n := newNode(t, "kubeadm-flags")
	before := n.read(kubeletFile)
	in := n.installer("v1", shimV1, func(p string) bool {
		if p == "state:kubelet" {
			takeSlot(t, n, "node-b")
			time.Sleep(100 * time.Millisecond) // a renewal sees it
		}
		return false
	})
	err := in.Install(context.Background())
	var f *Failure
	if err == nil || errors.As(err, &f) || !strings.Contains(err.Error(), "the kubelet restart slot was lost") {
		t.Fatalf("got %v, want the slot lost", err)
	}
	in.Close()
	if n.count("restart kubelet.service") != 0 || n.guardLoaded() || n.read(kubeletFile) != before {
		t.Errorf("the kubelet was touched: jobs %v, guard %v", n.jobs, n.guardLoaded())
	}
	if h := slotHolder(t, n); h != "node-b" {
		t.Errorf("the slot is %q's", h)
	}
	takeSlot(t, n, "")
	if err := n.installer("v1", shimV1, nil).Install(context.Background()); err != nil {
		t.Fatal(err)
	}
	n.wantOn(shimSocket)
	if h := slotHolder(t, n); h != "" {
		t.Errorf("the slot is %q's after the install", h)
	}
}

// TestFailedReleasesSlot: a node whose rollback failed (containerd down
// once the kubelet is back on it) needs a person, and keeps no slot: the
// other nodes' restarts do not wait for it.
func TestFailedReleasesSlot(t *testing.T) {
	n := newNode(t, "kubeadm-flags")
	n.notReadyViaShim = true
	in := n.installer("v1", shimV1, func(p string) bool {
		if p == "state:rolling-back" {
			n.mu.Lock()
			n.containerdDown = true
			n.mu.Unlock()
		}
		return false
	})
	defer in.Close()
	wantFailure(t, in.Install(context.Background()), StateFailed)
	if h := slotHolder(t, n); h != "" {
		t.Errorf("a failed node keeps the slot: held by %q", h)
	}
}
