package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/nriplugin"
)

// In the plugin mode the shim is healthy (/healthz 200, which
// deploy/plugin's readinessProbe asks) only while it is connected to a
// containerd whose NRI adjusts namespaces: on a node with NRI off (no
// socket), or a containerd older than 2.2, it is not Ready, and says why.
func TestPluginModeHealth(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		runtime string // containerd's version as its NRI names it; "": no NRI socket
		want    string // in CheckBackend's error; "": healthy
	}{
		{desc: "NRI off", want: "not connected to containerd's NRI: NRI socket"},
		{desc: "containerd 2.0", runtime: "v2.0.14", want: `cannot adjust namespaces (needs v0.10.0)`},
		{desc: "containerd 2.4", runtime: "v2.4.2"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			socket := "/nonexistent/nri.sock"
			if tc.runtime != "" {
				_, socket = nriRuntimeOf(t, tc.runtime)
			}
			log := logrus.New()
			log.SetLevel(logrus.PanicLevel)
			p := nriplugin.New(socket, logrus.NewEntry(log), nil)
			r := buildRigMode(t, false, p, true)
			<-p.Tried()
			var err error
			waitFor(t, "the plugin's health to settle", func() bool {
				err = r.server.CheckBackend(context.Background())
				return (err == nil) == (tc.want == "")
			})
			if tc.want != "" && !strings.Contains(err.Error(), tc.want) {
				t.Errorf("CheckBackend = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

// In the plugin mode, a pins directory that its name through the plugin's
// root (/proc/<pid>/root/...) does not reach (not in the host's PID
// namespace) keeps it from connecting to containerd's NRI at all, however
// able that is: it answers nothing, and /healthz says why.
func TestPluginModeHealthPinsUnreachable(t *testing.T) {
	_, socket := nriRuntimeOf(t, "v2.4.2")
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	p := nriplugin.New(socket, logrus.NewEntry(log), nil)
	const why = "/proc/7/root/run/p/pins is not the pins directory /run/p/pins"
	r := buildRigEdit(t, false, p, true, func(d *deps) { d.pinsOff = errors.New(why) })
	<-p.Tried()
	time.Sleep(200 * time.Millisecond) // a connection, were one made, registers in milliseconds
	err := r.server.CheckBackend(context.Background())
	if err == nil || !strings.Contains(err.Error(), "not connected to containerd's NRI: "+why) {
		t.Errorf("CheckBackend = %v, want it to say %q", err, why)
	}
	if via, _ := r.server.TargetingPath(); via != viaNone {
		t.Errorf("targeting path %s, want %s", via, viaNone)
	}
}

// In the plugin mode, a pin that cannot be made (mount(2) refused, as
// containerd's default AppArmor profile refuses it) keeps it from
// connecting to containerd's NRI, found by its trial pin at the start: it
// answers nothing, rather than a fallback for every create, and /healthz
// says why.
func TestPluginModeHealthCannotPin(t *testing.T) {
	for _, tc := range []struct {
		desc string
		hold error
		want string // in CheckBackend's error; "": healthy
	}{
		{desc: "mount refused", hold: errors.New("pin pid namespace: bind-mount onto /run/p/pins/x/pid: permission denied"),
			want: "not connected to containerd's NRI: a trial pin, of the plugin's own PID namespace, failed"},
		{desc: "pinned"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			_, socket := nriRuntimeOf(t, "v2.4.2")
			log := logrus.New()
			log.SetLevel(logrus.PanicLevel)
			p := nriplugin.New(socket, logrus.NewEntry(log), nil)
			r := buildRigEdit(t, false, p, true, func(d *deps) { d.pins.(*fakePins).holdErr = tc.hold })
			<-p.Tried()
			var err error
			waitFor(t, "the plugin's health to settle", func() bool {
				err = r.server.CheckBackend(context.Background())
				return (err == nil) == (tc.want == "")
			})
			if tc.want != "" && (!strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "permission denied")) {
				t.Errorf("CheckBackend = %v, want it to say %q, and the mount's error", err, tc.want)
			}
		})
	}
}

// pluginPins names the plugin's pins through its own root, which reaches
// them: this process's pid, as the runtime on the host opens them.
func TestPluginPins(t *testing.T) {
	dir := t.TempDir()
	store, names, off := pluginPins(dir)
	if off != nil {
		t.Fatalf("pluginPins: %v", off)
	}
	paths, err := store.Paths("dbg", []*namespaces.Handle{{Kind: namespaces.PID}})
	want := fmt.Sprintf("/proc/%d/root%s/pins/dbg/pid", os.Getpid(), dir)
	if err != nil || paths[namespaces.PID] != want {
		t.Errorf("Paths = %v, %v; want %s", paths, err, want)
	}
	if pid, id, ok := names.Owner(want); !ok || pid != os.Getpid() || id != "dbg" {
		t.Errorf("Owner(%s) = %d %s %v", want, pid, id, ok)
	}
}
