package main

import (
	"strings"
	"testing"
)

const pluginMetrics = `# HELP cri_nstarget_targeting_total NamespaceMode TARGET decisions
# TYPE cri_nstarget_targeting_total counter
cri_nstarget_targeting_total{mode="plugin",namespace="pid",reason="none",result="targeted",stage="create"} 8
cri_nstarget_targeting_total{mode="plugin",namespace="pid",reason="pid_not_in_pod",result="fallback",stage="create"} 8
cri_nstarget_targeting_total{mode="plugin",namespace="pid",reason="none",result="joined",stage="verify"} 7
cri_nstarget_targeting_total{mode="plugin",namespace="ipc",reason="none",result="targeted",stage="create"} 2
cri_nstarget_requests_total{code="OK",method="CreateContainer",mode="plugin"} 4
cri_nstarget_pins{mode="plugin",namespace="pid"} 0
`

// The pin check passes a plugin that pinned and saw a join, and fails one
// that did neither (not attached), saying which.
func TestPinCheck(t *testing.T) {
	n, err := targetingCounts(strings.NewReader(pluginMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if n["create/targeted/none"] != 8 || n["verify/joined/none"] != 7 || n["create/fallback/pid_not_in_pod"] != 8 || len(n) != 3 {
		t.Errorf("targetingCounts = %v", n)
	}
	if err := pinCheck(n); err != nil {
		t.Errorf("pinCheck: %v", err)
	}
	detached, _ := targetingCounts(strings.NewReader("cri_nstarget_requests_total{code=\"OK\",method=\"Version\",mode=\"plugin\"} 1\n"))
	err = pinCheck(detached)
	if err == nil || !strings.Contains(err.Error(), "pinned no TARGET create") || !strings.Contains(err.Error(), "saw no debug container joined") {
		t.Errorf("pinCheck of a plugin that took no part = %v, want both missing", err)
	}
}
