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
	a, socket := unstartedNRIRuntime(t, "v2.4.2")
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	p := nriplugin.New(socket, logrus.NewEntry(log), nil)
	// the shim runs p from its start; nothing listens on the socket yet, so
	// p tries again every second (nriplugin's retry)
	r := buildRig(t, false, p)

	var deadlocked bool
	r.backend.onRemovePod = func() {
		outer := a.BlockPluginSync()
		// containerd's NRI comes up now (containerd came back, say), and
		// the shim connects to it at its next try
		if err := a.Start(); err != nil {
			t.Error(err)
			outer.Unblock()
			return
		}
		t.Cleanup(a.Stop)
		// time enough to connect, register and ask for the lock, were it let
		time.Sleep(1500 * time.Millisecond)
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
