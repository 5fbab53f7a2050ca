package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cri-nstarget/cri-nstarget/conformance/claims"
)

func writeSuiteReport(t *testing.T, dir, label string, results ...suiteResult) {
	t.Helper()
	b, _ := json.Marshal(suiteReport{Label: label, RuntimeName: "containerd", RuntimeVersion: "v2.4.2", Results: results})
	if err := os.WriteFile(filepath.Join(dir, "suite-"+label+".json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// The README's table has a column per mode from the runs, the plugin
// mode's not-claimed cases listed with their reasons; without a
// plugin-mode run there is no table.
func TestRenderReadme(t *testing.T) {
	dir := t.TempDir()
	if _, err := renderReadme(dir, "containerd-2.4"); err == nil || !strings.Contains(err.Error(), "no run containerd-2.4-plugin") {
		t.Errorf("renderReadme without a plugin-mode run: %v", err)
	}
	writeSuiteReport(t, dir, "containerd-2.4-direct", suiteResult{Case: "pid-target", Result: "pass"}, suiteResult{Case: "ipc-target", Result: "fail"})
	writeSuiteReport(t, dir, "containerd-2.4-shim", suiteResult{Case: "pid-target", Result: "pass"}, suiteResult{Case: "ipc-target", Result: "pass"})
	writeSuiteReport(t, dir, "containerd-2.4-plugin", suiteResult{Case: "pid-target", Result: "pass"}, suiteResult{Case: "ipc-target", Result: claims.NotClaimed, Reason: claims.Plugin[0].Said("")})
	writeSuiteReport(t, dir, "containerd-2.3-plugin", suiteResult{Case: "pid-target", Result: "fail"})
	got, err := renderReadme(dir, "containerd-2.4")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| case | containerd alone | proxy | plugin mode |",
		"| `pid-target` | pass | pass | pass |",
		"| `ipc-target` | **FAIL** | pass | not claimed |",
		"| **passed / failed / skipped** | 1 / 1 / 0 | 2 / 0 / 0 | 1 / 0 / 0 (1 not claimed) |",
		"containerd-2.4: containerd v2.4.2",
		"- `ipc-target`: IPC TARGET: containerd writes no IPC namespace path",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("README block lacks %q:\n%s", want, got)
		}
	}
	if !strings.HasPrefix(got, readmeBegin) || !strings.HasSuffix(got, readmeEnd) {
		t.Errorf("README block not between its markers:\n%s", got)
	}
}
