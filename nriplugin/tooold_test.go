package nriplugin

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	nrilog "github.com/containerd/nri/pkg/log"
	"github.com/sirupsen/logrus"
)

// A runtime whose NRI cannot adjust namespaces: NRI's own runtime side as
// containerd v2.0.14 names itself, whose NRI version the stub infers from
// that (v0.8.0: containerd 2.0 and 2.1 send none; this one sends "unknown",
// which the stub treats alike). The plugin turns NRI down, saying why, after the
// runtime has synchronized it (the registration gate's end), and does not
// register again within retryTooOld. It used to register again every
// second (retry), each time taking containerd's plugin-sync lock for
// writing and being sent every pod and container.
func TestRuntimeTooOldIsNotAskedEverySecond(t *testing.T) {
	dir, err := os.MkdirTemp("", "nri") // short: a unix socket path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "nri.sock")
	var syncs atomic.Int32
	sync := func(ctx context.Context, cb adaptation.SyncCB) error {
		syncs.Add(1)
		_, err := cb(ctx, nil, nil)
		return err
	}
	update := func(context.Context, []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		return nil, nil
	}
	quietNRI()
	rt, err := adaptation.New("containerd", "v2.0.14", sync, update, adaptation.WithSocketPath(socket),
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")), adaptation.WithPluginConfigPath(filepath.Join(dir, "conf")))
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rt.Stop)

	base := syncs.Load() // the runtime synchronizes its (no) plugins as it starts
	var changes atomic.Int32
	p := New(socket, logrus.NewEntry(logrus.New()), func(bool, string) { changes.Add(1) })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { p.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	<-p.Tried()
	usable, why := p.Usable()
	if usable || !strings.Contains(why, `NRI version "v0.8.0" cannot adjust namespaces (needs v0.10.0)`) {
		t.Errorf("after registering with a runtime too old: usable %v (%s), want unusable, saying why", usable, why)
	}
	if n := syncs.Load() - base; n != 1 {
		t.Errorf("NRI reported its outcome after %d synchronizations of the plugin by the runtime, want 1 (the gate's end)", n)
	}
	time.Sleep(2500 * time.Millisecond)
	if n := syncs.Load() - base; n != 1 {
		t.Errorf("the runtime synchronized the plugin %d times in 2.5 s, want 1: a runtime too old is asked again after %v, not every %v", n, retryTooOld, retry)
	}
	if n := changes.Load(); n != 1 {
		t.Errorf("%d changes of the targeting path reported, want 1", n)
	}
}

// quietNRI silences NRI's own (global) log in these tests.
func quietNRI() { nrilog.Set(quietLog{}) }

type quietLog struct{}

func (quietLog) Debugf(context.Context, string, ...any) {}

func (quietLog) Infof(context.Context, string, ...any) {}

func (quietLog) Warnf(context.Context, string, ...any) {}

func (quietLog) Errorf(context.Context, string, ...any) {}
