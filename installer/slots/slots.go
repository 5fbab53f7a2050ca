// Package slots limits how many nodes restart their kubelet at once, across
// a cluster: Count Leases (coordination.k8s.io/v1) named Prefix-0 ...
// Prefix-(Count-1) in one namespace, each held by at most one node. A node
// takes one before it restarts its kubelet and gives it back once its node
// is Ready again; while it holds it, it renews it. A slot whose holder has
// not renewed it for the lease's duration (its pod died) is free to take.
// The apiserver's optimistic concurrency (resourceVersion) makes two nodes
// that try to take the same slot at once see one win and the other fail.
package slots

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Leases are one namespace's Leases: the part of client-go's typed
// LeaseInterface this package uses.
type Leases interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*coordinationv1.Lease, error)
	Create(ctx context.Context, l *coordinationv1.Lease, opts metav1.CreateOptions) (*coordinationv1.Lease, error)
	Update(ctx context.Context, l *coordinationv1.Lease, opts metav1.UpdateOptions) (*coordinationv1.Lease, error)
}

// Options configure Slots.
type Options struct {
	// Leases are the namespace's where the slots are.
	Leases Leases
	// Prefix names the Leases: Prefix-0 ... Prefix-(Count-1).
	Prefix string
	// Count is how many nodes may hold a slot at once (at least 1).
	Count int
	// Holder is this node's name, the Leases' holderIdentity.
	Holder string
	// Duration is the lease duration written on a slot taken: unrenewed
	// for that long, it is free again. Default 60s.
	Duration time.Duration
	// Renew is how often a held slot is renewed; default Duration/4.
	Renew time.Duration
	// Retry is how often the slots are looked at while none is free;
	// default 2s.
	Retry time.Duration
	// Waiting, when set, is told once per wait who holds the slots.
	Waiting func(holders []string)
	// Now is the clock; default time.Now.
	Now func() time.Time
}

// Slots are one node's view of the cluster's slots.
type Slots struct {
	o Options
}

// New returns the slots of o.
func New(o Options) (*Slots, error) {
	if o.Count < 1 {
		return nil, fmt.Errorf("slots: count %d: want at least 1", o.Count)
	}
	if o.Holder == "" || o.Prefix == "" || o.Leases == nil {
		return nil, errors.New("slots: Leases, Prefix and Holder are required")
	}
	if o.Duration <= 0 {
		o.Duration = 60 * time.Second
	}
	if o.Renew <= 0 {
		o.Renew = o.Duration / 4
	}
	if o.Retry <= 0 {
		o.Retry = 2 * time.Second
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Slots{o: o}, nil
}

// Held is a slot this node holds; it is renewed until Release or Abandon
// (or until the process ends: the slot then expires after its duration,
// unless this node takes it again first).
type Held struct {
	Name string
	s    *Slots
	stop context.CancelFunc
	done chan struct{}

	mu sync.Mutex // guards the fields below, written by the renewing goroutine
	// renewed is when the slot was last written as this node's; taken is
	// set once another holder was found on it, failed is the last
	// renewal's error (nil once one succeeds again).
	renewed time.Time
	taken   error
	failed  error
}

// Acquire returns once this node holds a slot: one it already holds (a
// restarted installer takes its own slot back), else a free or expired one.
// It waits, looking again every Retry, while all are held; ctx ends the wait.
func (s *Slots) Acquire(ctx context.Context) (*Held, error) {
	told := false
	for {
		name, holders, err := s.take(ctx)
		if err != nil {
			return nil, err
		}
		if name != "" {
			// Renewed whether or not the wait's ctx ends: a node that
			// holds a slot keeps it until it says so.
			return s.hold(context.WithoutCancel(ctx), name), nil
		}
		if !told && s.o.Waiting != nil {
			s.o.Waiting(holders)
			told = true
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for a restart slot (held by %s): %w", strings.Join(holders, ", "), ctx.Err())
		case <-time.After(s.o.Retry):
		}
	}
}

// take makes one pass over the slots: this node's own first, then a free
// one. It returns the slot taken, or "" and who holds them.
func (s *Slots) take(ctx context.Context) (string, []string, error) {
	leases := s.o.Leases
	type slot struct {
		lease  *coordinationv1.Lease
		exists bool
	}
	var current []slot
	for i := range s.o.Count {
		name := s.o.Prefix + "-" + strconv.Itoa(i)
		l, err := leases.Get(ctx, name, metav1.GetOptions{})
		exists := err == nil
		if apierrors.IsNotFound(err) {
			l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
		} else if err != nil {
			return "", nil, fmt.Errorf("get lease %s: %w", name, err)
		}
		if holder(l) == s.o.Holder {
			if err := s.write(ctx, l, true, false); err == nil {
				return name, nil, nil
			} else if !apierrors.IsConflict(err) {
				return "", nil, err
			}
		}
		current = append(current, slot{l, exists})
	}
	var holders []string
	for _, c := range current {
		l := c.lease
		if h := holder(l); h != "" && !s.expired(l) {
			holders = append(holders, h)
			continue
		}
		err := s.write(ctx, l, c.exists, true)
		switch {
		case err == nil:
			return l.Name, nil, nil
		case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
			holders = append(holders, "(taken meanwhile)")
		default:
			return "", nil, err
		}
	}
	return "", holders, nil
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// expired: not renewed for its duration by its holder's clock, as read on
// this node's (leader election's rule: clocks may differ by less than that).
func (s *Slots) expired(l *coordinationv1.Lease) bool {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return true
	}
	d := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	return s.o.Now().After(l.Spec.RenewTime.Add(d))
}

// write makes this node the holder of l, renewed now: a create when l does
// not exist yet, else an update conditional on l's resourceVersion. taking
// counts a transition.
func (s *Slots) write(ctx context.Context, l *coordinationv1.Lease, exists, taking bool) error {
	now := metav1.NewMicroTime(s.o.Now())
	secs := int32(s.o.Duration / time.Second)
	l = l.DeepCopy()
	l.Spec.HolderIdentity = &s.o.Holder
	l.Spec.LeaseDurationSeconds = &secs
	l.Spec.RenewTime = &now
	if taking {
		l.Spec.AcquireTime = &now
		if exists {
			n := int32(1)
			if l.Spec.LeaseTransitions != nil {
				n = *l.Spec.LeaseTransitions + 1
			}
			l.Spec.LeaseTransitions = &n
		}
	}
	leases := s.o.Leases
	var err error
	if !exists {
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
	} else {
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	}
	if err != nil && !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("take lease %s: %w", l.Name, err)
	}
	return err
}

// hold starts renewing name until Release or Abandon.
func (s *Slots) hold(ctx context.Context, name string) *Held {
	ctx, stop := context.WithCancel(ctx)
	h := &Held{Name: name, s: s, stop: stop, done: make(chan struct{}), renewed: s.o.Now()}
	go func() {
		defer close(h.done)
		t := time.NewTicker(s.o.Renew)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			now := s.o.Now()
			err := h.renew(ctx)
			if ctx.Err() != nil {
				return
			}
			h.mu.Lock()
			switch {
			case errors.Is(err, errTaken):
				h.taken = err
			case err != nil:
				h.failed = err
			default:
				h.renewed, h.failed = now, nil
			}
			h.mu.Unlock()
		}
	}()
	return h
}

// renew writes a new renew time on the slot while this node holds it.
func (h *Held) renew(ctx context.Context) error {
	l, err := h.s.o.Leases.Get(ctx, h.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("renew lease %s: %w", h.Name, err)
	}
	if holder(l) != h.s.o.Holder {
		return fmt.Errorf("lease %s is held by %q now: %w", h.Name, holder(l), errTaken)
	}
	return h.s.write(ctx, l, true, false)
}

// errTaken: another node holds the slot.
var errTaken = errors.New("taken by another node")

// Lost says why the slot may no longer be this node's: another holder was
// found on it, or it was not renewed for its duration (others may take it
// now). A renewal that failed within the duration (the apiserver out of
// reach for a while) is not a loss.
func (h *Held) Lost() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.taken != nil {
		return h.taken
	}
	if since := h.s.o.Now().Sub(h.renewed); since >= h.s.o.Duration {
		return fmt.Errorf("lease %s not renewed for %s (it may be another node's now): %v", h.Name, since.Round(time.Second), h.failed)
	}
	return nil
}

// Abandon stops renewing the slot and leaves it held, as a process that
// dies does: it expires after its duration.
func (h *Held) Abandon() {
	h.stop()
	<-h.done
}

// Release stops renewing the slot and frees it, if this node still holds
// it.
func (h *Held) Release(ctx context.Context) error {
	h.stop()
	<-h.done
	leases := h.s.o.Leases
	for range 5 {
		l, err := leases.Get(ctx, h.Name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("release lease %s: %w", h.Name, err)
		}
		if holder(l) != h.s.o.Holder {
			return nil
		}
		l.Spec.HolderIdentity = nil
		l.Spec.RenewTime = nil
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			if err != nil {
				return fmt.Errorf("release lease %s: %w", h.Name, err)
			}
			return nil
		}
	}
	return fmt.Errorf("release lease %s: conflicts", h.Name)
}
