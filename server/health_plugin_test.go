package server

import (
	"context"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"

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
