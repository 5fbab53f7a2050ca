package slots

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/util/retry"
)

const ns = "cri-nstarget"

// clientset is client-go's fake with the apiserver's optimistic
// concurrency on Leases, which the fake's object tracker leaves out: a
// create of an existing Lease fails, and so does an update whose
// resourceVersion is not the stored one.
func clientset() *fake.Clientset {
	cs := fake.NewClientset()
	gvr := coordinationv1.SchemeGroupVersion.WithResource("leases")
	var mu sync.Mutex
	cs.PrependReactor("create", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		l := a.(k8stesting.CreateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		l.ResourceVersion = "1"
		return true, l, cs.Tracker().Create(gvr, l, a.GetNamespace())
	})
	cs.PrependReactor("update", "leases", func(a k8stesting.Action) (bool, runtime.Object, error) {
		mu.Lock()
		defer mu.Unlock()
		l := a.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).DeepCopy()
		cur, err := cs.Tracker().Get(gvr, a.GetNamespace(), l.Name)
		if err != nil {
			return true, nil, err
		}
		if rv := cur.(*coordinationv1.Lease).ResourceVersion; rv != l.ResourceVersion {
			return true, nil, apierrors.NewConflict(gvr.GroupResource(), l.Name, fmt.Errorf("resourceVersion %s, stored %s", l.ResourceVersion, rv))
		}
		n, _ := strconv.Atoi(l.ResourceVersion)
		l.ResourceVersion = strconv.Itoa(n + 1)
		return true, l, cs.Tracker().Update(gvr, l, a.GetNamespace())
	})
	return cs
}

func newSlots(t *testing.T, cs *fake.Clientset, holder string, count int, duration time.Duration) *Slots {
	t.Helper()
	s, err := New(Options{Leases: cs.CoordinationV1().Leases(ns), Prefix: "cri-nstarget-install", Count: count, Holder: holder,
		Duration: duration, Renew: 20 * time.Millisecond, Retry: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestLimit: 12 nodes restart their kubelets with N slots; never more than
// N hold one at once, and all get theirs.
func TestLimit(t *testing.T) {
	for _, n := range []int{1, 3} {
		t.Run(fmt.Sprintf("N=%d", n), func(t *testing.T) {
			cs := clientset()
			var holding, most, done atomic.Int32
			var wg sync.WaitGroup
			for i := range 12 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					s := newSlots(t, cs, "node-"+strconv.Itoa(i), n, time.Minute)
					h, err := s.Acquire(ctx)
					if err != nil {
						t.Error(err)
						return
					}
					now := holding.Add(1)
					for m := most.Load(); now > m && !most.CompareAndSwap(m, now); m = most.Load() {
					}
					time.Sleep(10 * time.Millisecond) // the kubelet's restart
					holding.Add(-1)
					if err := h.Release(ctx); err != nil {
						t.Error(err)
					}
					done.Add(1)
				}()
			}
			wg.Wait()
			if done.Load() != 12 {
				t.Fatalf("%d of 12 nodes got a slot", done.Load())
			}
			if m := most.Load(); m > int32(n) {
				t.Errorf("%d nodes held a slot at once, limit %d", m, n)
			} else {
				t.Logf("at most %d nodes held a slot at once (limit %d)", m, n)
			}
		})
	}
}

// TestTakeOverExpired: a node whose pod died holding a slot (no renewal,
// no release) keeps it for the lease's duration, then another takes it;
// the dead node's new pod would have taken its own back.
func TestTakeOverExpired(t *testing.T) {
	cs := clientset()
	const duration = 2 * time.Second // whole seconds: leaseDurationSeconds
	a := newSlots(t, cs, "node-a", 1, duration)
	first, err := a.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	first.Abandon() // node-a's installer is killed: it renews no more

	// node-a's next installer takes its own slot back at once. The Lease's
	// renewTime is then no earlier than renewed: its duration runs from
	// there, not from when node-a's installer died.
	renewed := time.Now()
	again, err := a.Acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	again.Abandon() // and dies too

	var waited []string
	b, err := New(Options{Leases: cs.CoordinationV1().Leases(ns), Prefix: "cri-nstarget-install", Count: 1, Holder: "node-b",
		Duration: duration, Retry: 50 * time.Millisecond, Waiting: func(h []string) { waited = h }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := b.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release(ctx)
	if d := time.Since(renewed); d <= duration {
		t.Errorf("node-b took node-a's slot %v after node-a last renewed it, before its duration %v", d, duration)
	}
	if len(waited) != 1 || waited[0] != "node-a" {
		t.Errorf("node-b was told the slots are held by %q, want node-a", waited)
	}
	l, err := cs.CoordinationV1().Leases(ns).Get(ctx, "cri-nstarget-install-0", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if holder(l) != "node-b" || l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions < 1 {
		t.Errorf("lease after the takeover: holder %q, transitions %v", holder(l), l.Spec.LeaseTransitions)
	}
}

// TestRenewKeepsIt: a held slot is renewed, so a slot held longer than its
// duration is not taken.
func TestRenewKeepsIt(t *testing.T) {
	cs := clientset()
	const duration = time.Second
	a := newSlots(t, cs, "node-a", 1, duration)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	h, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	b := newSlots(t, cs, "node-b", 1, duration)
	wait, cancelWait := context.WithTimeout(ctx, 3*duration)
	defer cancelWait()
	if got, err := b.Acquire(wait); err == nil {
		t.Fatalf("node-b took %s while node-a renewed it", got.Name)
	}
	if err := h.Lost(); err != nil {
		t.Errorf("renewal: %v", err)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}
	got, err := b.Acquire(ctx)
	if err != nil {
		t.Fatalf("after node-a released it: %v", err)
	}
	got.Release(ctx)
}

// TestLost: a renewal that fails for less than the lease's duration (the
// apiserver out of reach) is not a loss; unrenewed for the duration, or
// held by another node, the slot is lost, and Lost says so.
func TestLost(t *testing.T) {
	cs := clientset()
	var down atomic.Bool
	cs.PrependReactor("get", "leases", func(k8stesting.Action) (bool, runtime.Object, error) {
		if down.Load() {
			return true, nil, apierrors.NewServiceUnavailable("the apiserver is away")
		}
		return false, nil, nil
	})
	const duration = time.Second
	a := newSlots(t, cs, "node-a", 1, duration)
	ctx := context.Background()
	h, err := a.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	down.Store(true)
	time.Sleep(duration / 2)
	if err := h.Lost(); err != nil {
		t.Errorf("lost after %v of apiserver errors, under the duration: %v", duration/2, err)
	}
	time.Sleep(duration)
	if err := h.Lost(); err == nil || !strings.Contains(err.Error(), "not renewed for") {
		t.Errorf("unrenewed for longer than its duration: Lost %v", err)
	}
	down.Store(false)
	time.Sleep(100 * time.Millisecond)
	if err := h.Lost(); err != nil {
		t.Errorf("renewed again: Lost %v", err)
	}
	// node-b takes the lease; h's renewal may update it between the Get and
	// the Update, so the take is retried on a conflict, as a client would
	other := "node-b"
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := cs.CoordinationV1().Leases(ns).Get(ctx, "cri-nstarget-install-0", metav1.GetOptions{})
		if err != nil {
			return err
		}
		l.Spec.HolderIdentity = &other
		_, err = cs.CoordinationV1().Leases(ns).Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if err := h.Lost(); err == nil || !strings.Contains(err.Error(), `held by "node-b"`) {
		t.Errorf("taken by node-b: Lost %v", err)
	}
	h.Abandon()
}
