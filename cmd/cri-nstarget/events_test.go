package main

import (
	"strings"
	"testing"

	"github.com/cri-nstarget/cri-nstarget/server"
)

// The plugin mode says on its node, once, that it does nothing there when
// its first attempt finds containerd's NRI unusable, or when containerd is
// seen refusing its namespace adjustments, and why, and what it needs;
// connected, it says nothing.
func TestPluginUnsupported(t *testing.T) {
	for _, tc := range []struct {
		via, why string
		want     bool
	}{
		{via: server.ViaNRI, why: "connected to NRI v0.12.0 at /var/run/nri/nri.sock"},
		{via: "none", why: `the runtime's NRI version "v0.8.0" cannot adjust namespaces (needs v0.10.0)`, want: true},
		{via: "none", why: "NRI socket /var/run/nri/nri.sock: dial unix /var/run/nri/nri.sock: connect: no such file or directory", want: true},
		{via: "none", why: "the runtime refused a namespace adjustment: containerd undid its create of container 3f9a (pod shop/web) after the plugin's answer adjusted its namespaces", want: true},
	} {
		e, ok := pluginUnsupported(tc.via, tc.why)
		if ok != tc.want {
			t.Errorf("pluginUnsupported(%q, %q): an Event %v, want %v", tc.via, tc.why, ok, tc.want)
			continue
		}
		if ok && (!e.Node || !e.Warning || e.Reason != "PluginUnsupported" || !strings.Contains(e.Message, tc.why) ||
			!strings.Contains(e.Message, "reject_namespace_adjustment")) {
			t.Errorf("pluginUnsupported(%q, %q) = %+v: want a Warning PluginUnsupported on the node, saying why", tc.via, tc.why, e)
		}
	}
}
