package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"go.uber.org/goleak"

	"github.com/cri-nstarget/cri-nstarget/intents"
	"github.com/cri-nstarget/cri-nstarget/nriplugin"
)

// slowIntents is an intent store whose List fails, and after its first
// call takes slow to do so, whatever the caller's context: a disk that
// hangs.
type slowIntents struct {
	intentStore
	slow    time.Duration
	lists   atomic.Int32
	entered chan struct{} // closed when the second List begins
}

func (s *slowIntents) List() ([]intents.Record, error) {
	if s.lists.Add(1) == 2 {
		close(s.entered)
		time.Sleep(s.slow)
	}
	return nil, errors.New("disk: input/output error")
}

// After Shutdown no goroutine of the server is left: the side queue's,
// the NRI connection's (to a socket that is not there: it keeps trying),
// and the reconciler's loop, caught in a reconcile that outlasts the
// shutdown's cancellation (its intent store hangs 3 s, longer than goleak
// looks for a goroutine to end).
func TestShutdownLeavesNoGoroutine(t *testing.T) {
	var before goleak.Option
	store := &slowIntents{slow: 3 * time.Second, entered: make(chan struct{})}
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	r := buildRigEdit(t, false, nil, false, func(d *deps) {
		before = goleak.IgnoreCurrent() // the rig's backend and its connection are the test's
		store.intentStore = d.intents
		d.intents = store
		d.nri = nriplugin.New(t.TempDir()+"/no-nri.sock", logrus.NewEntry(log), nil)
	})
	if err := r.server.Reconcile(context.Background()); err == nil {
		t.Fatal("Reconcile: nil, want the store's error (and the loop that retries it)")
	}
	select {
	case <-store.entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the reconciler's loop did not retry")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r.server.Shutdown(ctx)
	r.shim.Close() // the test's client of the shim
	goleak.VerifyNone(t, before)
}
