package claims

import (
	"strings"
	"testing"
)

// The suite's ids, as --list prints them, and one added later.
var ids = []string{"pid-target", "ipc-target", "userns/pid-target", "userns/ipc-target", "target-isolation", "two-debug",
	"target-restarted", "target-exited-before-create", "target-exited-before-start", "pid-reuse", "cross-pod",
	"unknown-target", "sandbox-as-target", "missing-target-id", "malformed-target-id/path", "malformed-target-id/nul",
	"network-target", "unknown-mode/pid", "unknown-mode/ipc", "removal-order", "some-new-case"}

// The plugin mode claims the cases where the plugin acts, a new case
// included; pid-reuse runs with only containerd's refusal not claimed; the
// rest are not run, each with a reason. Any claims everything.
func TestPlugin(t *testing.T) {
	claimed := map[string]bool{"pid-target": true, "userns/pid-target": true, "target-isolation": true, "two-debug": true,
		"target-restarted": true, "removal-order": true, "some-new-case": true}
	cs, err := Of(ModePlugin)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		c, ok := Unclaimed(cs, id)
		switch {
		case claimed[id] && ok:
			t.Errorf("%s not claimed (%s), want claimed", id, c.Reason)
		case !claimed[id] && !ok:
			t.Errorf("%s claimed, want not claimed", id)
		case ok && c.Reason == "":
			t.Errorf("%s not claimed without a reason", id)
		case ok && c.Runs() != (id == "pid-reuse"):
			t.Errorf("%s runs = %v; only pid-reuse runs", id, c.Runs())
		}
	}
	anyMode, err := Of(ModeAny)
	if err != nil || anyMode != nil {
		t.Errorf("Of(any) = %v, %v; want every case claimed", anyMode, err)
	}
	if _, err := Of("proxy"); err == nil || !strings.Contains(err.Error(), `"plugin"`) {
		t.Errorf("Of(proxy) = %v; want an error naming the modes", err)
	}
}

// Only containerd's own refusal of pid-reuse's start is not claimed: a
// debug container in the stranger's namespace still fails.
func TestTakes(t *testing.T) {
	c, _ := Unclaimed(Plugin, "pid-reuse")
	refused := `StartContainer failed with Unknown: invalid target container: container "778e0d30" is not running - in state CONTAINER_EXITED; want the pod's namespace or FailedPrecondition`
	joined := "debug container joined the PID namespace pid:[4026531836] of the unrelated process 415 that reused the target's PID"
	if !c.Takes(refused) {
		t.Errorf("containerd's refusal taken as a failure")
	}
	if c.Takes(joined) {
		t.Errorf("the stranger's namespace not claimed")
	}
	ipc, _ := Unclaimed(Plugin, "ipc-target")
	if ipc.Takes(refused) {
		t.Errorf("a case not run takes a failure")
	}
}

// A report's reason gives back the claim's reason, run or not.
func TestReasonOf(t *testing.T) {
	c, _ := Unclaimed(Plugin, "pid-reuse")
	for _, said := range []string{c.Said(""), c.Said("StartContainer failed with Unknown: x; y")} {
		if got := ReasonOf(said); got != c.Reason {
			t.Errorf("ReasonOf(%q) = %q, want %q", said, got, c.Reason)
		}
	}
}

// A TARGET container's spec names the plugin's pin, or containerd's own
// path, or nothing usable: only the pin passes.
func TestSpecNamespace(t *testing.T) {
	tests := []struct {
		desc, info string
		path       string
		pinned     bool
		err        string
	}{
		{"the plugin's pin", `{"runtimeSpec":{"linux":{"namespaces":[{"type":"pid","path":"/proc/812/root/var/lib/cri-nstarget/pins/c1/pid"},{"type":"mount"}]}}}`,
			"/proc/812/root/var/lib/cri-nstarget/pins/c1/pid", true, ""},
		{"containerd's own", `{"runtimeSpec":{"linux":{"namespaces":[{"type":"pid","path":"/proc/4131/ns/pid"}]}}}`, "/proc/4131/ns/pid", false, ""},
		{"a namespace of its own", `{"runtimeSpec":{"linux":{"namespaces":[{"type":"pid"}]}}}`, "", false, ""},
		{"no pid namespace", `{"runtimeSpec":{"linux":{"namespaces":[{"type":"ipc"}]}}}`, "", false, "no pid namespace"},
		{"no spec", `{"pid":12}`, "", false, "no runtimeSpec"},
		{"not JSON", `{`, "", false, "info"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			path, err := SpecNamespace(map[string]string{"info": tc.info}, "pid")
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("err = %v, want %q", err, tc.err)
			}
			if path != tc.path || Pinned(path) != tc.pinned {
				t.Errorf("path %q pinned %v, want %q %v", path, Pinned(path), tc.path, tc.pinned)
			}
		})
	}
	if _, err := SpecNamespace(map[string]string{}, "pid"); err == nil {
		t.Errorf("a status with no info: no error")
	}
}
