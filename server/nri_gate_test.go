package server

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/sirupsen/logrus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
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

// nriRuntime is NRI's runtime side as containerd 2.x runs it (the
// adaptation package), in this process, with a socket of its own.
func nriRuntime(t *testing.T) (*adaptation.Adaptation, string) {
	t.Helper()
	quiet := logrus.New()
	quiet.SetLevel(logrus.PanicLevel)
	nrilog.Set(nriLogger{logrus.NewEntry(quiet)})
	dir, err := os.MkdirTemp("", "nri") // short: a unix socket path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "nri.sock")
	sync := func(ctx context.Context, cb adaptation.SyncCB) error {
		_, err := cb(ctx, nil, nil)
		return err
	}
	update := func(context.Context, []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		return nil, nil
	}
	a, err := adaptation.New("containerd", "v2.4.2", sync, update, adaptation.WithSocketPath(socket),
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")), adaptation.WithPluginConfigPath(filepath.Join(dir, "conf")))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	return a, socket
}

// The shim connects to NRI while a RemovePodSandbox it forwarded is in the
// backend. The backend locks as containerd 2.4 does: BlockPluginSync for the
// whole RemovePodSandbox, and again inside it for each of the pod's
// containers. Had the shim registered meanwhile, the runtime would be
// waiting to lock for writing, and the inner block would wait for good. The
// registration waits for the removal instead, then completes.
func TestNRIRegistrationWaitsForPodRemoval(t *testing.T) {
	a, socket := nriRuntime(t)
	r := newRig(t, false)
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	p := newNRIPlugin(socket, logrus.NewEntry(log), nil)
	r.server.target.nri = p
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var deadlocked bool
	r.backend.onRemovePod = func() {
		outer := a.BlockPluginSync()
		go p.run(ctx) // the shim connects to NRI now (containerd came back, say)
		// time enough to register and ask for the lock, were it let
		time.Sleep(300 * time.Millisecond)
		inner := make(chan *adaptation.PluginSyncBlock)
		go func() { inner <- a.BlockPluginSync() }()
		select {
		case b := <-inner:
			b.Unblock()
		case <-time.After(3 * time.Second):
			deadlocked = true
			outer.Unblock() // undoes it, for the test to end
			(<-inner).Unblock()
			return
		}
		outer.Unblock()
	}
	rt := runtimeapi.NewRuntimeServiceClient(r.shim)
	if _, err := rt.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: "sb1"}); err != nil {
		t.Fatal(err)
	}
	if deadlocked {
		t.Fatal("the runtime's nested BlockPluginSync waited for a plugin registration: containerd 2.4 would hang")
	}
	deadline := time.Now().Add(5 * time.Second)
	for via, why := p.path(); via != ViaNRI; via, why = p.path() {
		if time.Now().After(deadline) {
			t.Fatalf("the shim did not register after the removal: path %s (%s)", via, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// synchronized: a removal now goes straight through
	r.backend.onRemovePod = nil
	start := time.Now()
	if _, err := rt.RemovePodSandbox(context.Background(), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: "sb2"}); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a removal after the registration took %v", d)
	}
}
