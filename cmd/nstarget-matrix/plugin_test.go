package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// suiteList is the suite's --list, as of issue 49's second part.
const suiteList = `pid-target                           PID TARGET: the debug container sees the target's processes
ipc-target                           IPC TARGET: the debug container is in the target's own IPC namespace
userns/pid-target                    user-namespaced pod, PID TARGET
userns/ipc-target                    user-namespaced pod, IPC TARGET
target-isolation                     the target keeps its namespaces
two-debug                            two debug containers
target-restarted                     after the target is replaced
target-exited-before-create          target exited before CreateContainer
target-exited-before-start           target exited between CreateContainer and StartContainer
pid-reuse                            target's PID reused
cross-pod                            target in another pod
unknown-target                       unknown target_id
sandbox-as-target                    a pod sandbox id as target_id
missing-target-id                    TARGET without target_id
malformed-target-id/path             malformed target_id (path)
malformed-target-id/nul              malformed target_id (nul)
network-target                       NamespaceMode TARGET for the network namespace
unknown-mode/pid                     unknown NamespaceMode value for pid
unknown-mode/ipc                     unknown NamespaceMode value for ipc
removal-order                        target removed before its debug container
some-new-case                        a case added later: claimed until listed
`

// Which cases run in the plugin mode: the claimed ones, and pid-reuse,
// whose refusal's code only is not claimed; a case the table does not
// name is claimed.
func TestClaimedCases(t *testing.T) {
	pattern, notRun := claimedCases(parseSuiteList(suiteList))
	re := regexp.MustCompile(pattern)
	runs := []string{"pid-target", "userns/pid-target", "target-isolation", "two-debug", "target-restarted", "pid-reuse", "removal-order", "some-new-case"}
	for _, id := range runs {
		if !re.MatchString(id) {
			t.Errorf("--cases %s does not run %s", pattern, id)
		}
	}
	var ids []string
	for _, c := range notRun {
		ids = append(ids, c.id)
		if re.MatchString(c.id) {
			t.Errorf("--cases %s runs %s, not claimed", pattern, c.id)
		}
		if reason, _, ok := unclaimed(c.id); !ok || reason == "" {
			t.Errorf("%s not run without a reason", c.id)
		}
	}
	if len(ids)+len(runs) != len(parseSuiteList(suiteList)) {
		t.Errorf("not run %v and run %v are not the %d listed", ids, runs, len(parseSuiteList(suiteList)))
	}
	if c := parseSuiteList(suiteList)[0]; c.id != "pid-target" || !strings.HasPrefix(c.title, "PID TARGET:") {
		t.Errorf("first case %+v", c)
	}
}

// claimReport takes back only the failure its pattern names: pid-reuse
// refused at the start by containerd is not claimed, pid-reuse in the
// stranger's namespace still fails; the cases not run are added, not
// claimed, each with its reason.
func TestClaimReport(t *testing.T) {
	refused := `StartContainer failed with Unknown: invalid target container: container "778e0d30" is not running - in state CONTAINER_EXITED; want the pod's namespace or FailedPrecondition`
	joined := "debug container joined the PID namespace pid:[4026531836] of the unrelated process 415 that reused the target's PID"
	tests := []struct {
		desc, reason, want string
		unfailed           int
	}{
		{"refused by containerd at the start", refused, notClaimed, 1},
		{"in the stranger's namespace", joined, "fail", 0},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "suite.json")
			in := map[string]any{"label": "containerd-2.4-plugin", "endpoint": "unix:///c.sock", "results": []map[string]any{
				{"case": "pid-target", "result": "pass"},
				{"case": "pid-reuse", "result": "fail", "reason": tc.reason},
			}}
			b, _ := json.Marshal(in)
			os.WriteFile(path, b, 0o644)
			unfailed, err := claimReport(path, []suiteCase{{"ipc-target", "IPC TARGET"}})
			if err != nil || unfailed != tc.unfailed {
				t.Fatalf("claimReport = %d, %v; want %d", unfailed, err, tc.unfailed)
			}
			raw, _ := os.ReadFile(path)
			var out struct {
				Endpoint string        `json:"endpoint"`
				Results  []suiteResult `json:"results"`
			}
			json.Unmarshal(raw, &out)
			if out.Endpoint != "unix:///c.sock" || len(out.Results) != 3 {
				t.Fatalf("report %s: want the endpoint kept and 3 results", raw)
			}
			if r := out.Results[1]; r.Result != tc.want || (tc.want == notClaimed) != strings.HasPrefix(r.Reason, "not claimed by plugin mode: the refusal's code") {
				t.Errorf("pid-reuse = %+v, want %s", r, tc.want)
			}
			if r := out.Results[2]; r.Case != "ipc-target" || r.Result != notClaimed || !strings.Contains(r.Reason, "(not run): IPC TARGET") {
				t.Errorf("ipc-target = %+v, want not claimed, not run, with the reason", r)
			}
		})
	}
}

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
