package server

import (
	"context"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/sirupsen/logrus"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/nriplugin"
)

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
	p := nriplugin.New(socket, logrus.NewEntry(log), nil)
	r.server.target.nri, r.server.target.removals = p, p
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var deadlocked bool
	r.backend.onRemovePod = func() {
		outer := a.BlockPluginSync()
		go p.Run(ctx) // the shim connects to NRI now (containerd came back, say)
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
	waitFor(t, "the shim to register after the removal", func() bool { usable, _ := p.Usable(); return usable })
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
