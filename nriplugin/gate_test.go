package nriplugin

import (
	"context"
	"errors"
	"testing"
	"time"
)

// returns reports whether f returns within a while.
func returns(f func()) bool {
	ch := make(chan struct{})
	go func() { f(); close(ch) }()
	select {
	case <-ch:
		return true
	case <-time.After(200 * time.Millisecond):
		return false
	}
}

func TestRegistrationGateRegistrationWaitsForRemovals(t *testing.T) {
	var g registrationGate
	ctx := context.Background()
	r1, err := g.removal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r2, _ := g.removal(ctx)

	got := make(chan func(), 1)
	go func() {
		done, err := g.registration(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- done
	}()
	// a removal arriving while the registration waits goes ahead
	var r3 func()
	if !returns(func() { r3, _ = g.removal(ctx) }) {
		t.Fatal("a removal waited for a registration that had not started")
	}
	r1()
	r1() // done twice counts out once
	r2()
	select {
	case <-got:
		t.Fatal("the registration started while a removal was in the backend")
	case <-time.After(100 * time.Millisecond):
	}
	r3()
	var reg func()
	select {
	case reg = <-got:
	case <-time.After(time.Second):
		t.Fatal("the registration did not start once the removals were done")
	}

	// while it runs, removals wait
	var r4 func()
	started := make(chan struct{})
	go func() {
		r4, _ = g.removal(ctx)
		close(started)
	}()
	select {
	case <-started:
		t.Fatal("a removal went ahead during a registration")
	case <-time.After(100 * time.Millisecond):
	}
	reg()
	select {
	case <-started:
	case <-time.After(time.Second):
		t.Fatal("the removal did not go ahead once the registration was done")
	}
	r4()
}

func TestRegistrationGateStaleDone(t *testing.T) {
	var g registrationGate
	ctx := context.Background()
	first, _ := g.registration(ctx)
	first()
	second, _ := g.registration(ctx)
	first() // a late close of the first connection
	cctx, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := g.removal(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("removal during the second registration = %v, want it to wait (deadline exceeded)", err)
	}
	second()
	done, err := g.removal(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done()
}

func TestRegistrationGateContext(t *testing.T) {
	var g registrationGate
	r, _ := g.removal(context.Background())
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { _, err := g.registration(ctx); errc <- err }()
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("registration after cancel = %v, want context.Canceled", err)
	}
	r()
	// nothing is left marked: both sides go ahead
	if !returns(func() {
		reg, _ := g.registration(context.Background())
		reg()
		done, _ := g.removal(context.Background())
		done()
	}) {
		t.Fatal("the gate stayed shut after a cancelled wait")
	}
}
