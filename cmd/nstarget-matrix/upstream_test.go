package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// junitOf is a ginkgo JUnit report with one spec in the given state.
func junitOf(state, spec string) string {
	inner := ""
	if state == "failed" {
		inner = `<failure message="oom_score_adj value 0 not equal to expected -997"></failure>`
	}
	return `<testsuites><testsuite><testcase name="[It] ` + spec + ` [sig-node, NodeConformance]" status="` + state + `" time="1.5">` + inner + `</testcase>` +
		`<testcase name="[SynchronizedBeforeSuite]" status="passed" time="0.1"></testcase></testsuite></testsuites>`
}

func TestUpstreamReport(t *testing.T) {
	dir := t.TempDir()
	spec := "[sig-node] Pods should be updated [NodeConformance]"
	for backend, states := range map[string][2]string{"containerd2": {"passed", "passed"}, "containerd16": {"failed", "failed"}} {
		d := filepath.Join(dir, backend)
		label := map[string]string{"containerd2": "containerd-2.4", "containerd16": "containerd-1.6"}[backend]
		files := map[string]string{
			"parity.txt":           label + " (e2e.test v1.37.2, kubelet v1.37.2), 40m\nspec ...\n",
			"junit-e2e-direct.xml": junitOf(states[0], spec),
			"junit-e2e-shim.xml":   junitOf(states[1], spec),
		}
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range files {
			if err := os.WriteFile(filepath.Join(d, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	known := filepath.Join(dir, "known.txt")
	docs := filepath.Join(dir, "conformance.md")
	page := "# page\n\n" + upstreamBegin + "\nold\n" + upstreamEnd + "\n\nafter\n"
	if err := os.WriteFile(docs, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}

	// With no reason for the spec that fails on 1.6, the block is written
	// and the command fails.
	if err := os.WriteFile(known, []byte("# none\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := upstreamCmd([]string{"--docs", docs, "--known-failures", known, dir})
	if err == nil || !strings.Contains(err.Error(), "with no reason (oom_score_adj value 0") {
		t.Errorf("err = %v, want the unexplained spec", err)
	}

	if err := os.WriteFile(known, []byte(`Pods should be updated | the host's oom_score_adj`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := upstreamCmd([]string{"--docs", docs, "--known-failures", known, dir}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(docs)
	if err != nil {
		t.Fatal(err)
	}
	got := string(b)
	for _, want := range []string{
		"# page\n\n" + upstreamBegin + "\n",
		"- containerd-2.4 (e2e.test v1.37.2, kubelet v1.37.2), 40m\n",
		"| spec | containerd-2.4 direct / shim | time | containerd-1.6 direct / shim | time |\n",
		"| `" + spec + "` | passed / passed | 1.5s / 1.5s | failed / failed | 1.5s / 1.5s |\n",
		"containerd-1.6 failed directly, failed through the shim: the host's oom_score_adj.\n",
		upstreamEnd + "\n\nafter\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("page:\n%s\nwant %q", got, want)
		}
	}
	if strings.Contains(got, "\nold\n") {
		t.Errorf("the old block is still there:\n%s", got)
	}
}
