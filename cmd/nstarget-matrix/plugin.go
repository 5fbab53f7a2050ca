package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// notClaimed is the result, in a plugin-mode run's report, of a case the
// plugin mode does not claim: neither pass, fail nor skip.
const notClaimed = "not-claimed"

// pluginUnclaimed are the suite's cases the plugin mode does not claim, and
// why: where only a proxy can act (issue 49; README, "Which mode"). Every
// other case of the suite is claimed, a new one included: a claimed case
// that fails fails the run. A case with a failure pattern runs, and only a
// failure that matches it is not claimed: pid-reuse's refusal at the start
// is containerd's (its target is not running) with containerd's code, but
// a debug container in the stranger's namespace still fails the run.
var pluginUnclaimed = []struct{ pattern, failure, reason string }{
	{`^(userns/)?ipc-target$`, "", "IPC TARGET: containerd writes no IPC namespace path for TARGET, so NRI shows the plugin none to pin; the proxy's"},
	{`^target-exited-before-(create|start)$`, "", "a target that is not running: containerd refuses it (the create or the start fails with its own code) before NRI sees it; the proxy's"},
	{`^pid-reuse$`, `^StartContainer failed with Unknown: invalid target container: container "[0-9a-f]+" is not running`,
		"the refusal's code: containerd refuses the start itself (Unknown), its target not running, and FailedPrecondition is the proxy's; still run, as the plugin claims the rest: a debug container in the stranger's namespace fails the run"},
	{`^(cross-pod|unknown-target|sandbox-as-target|missing-target-id|malformed-target-id/.+|network-target)$`, "", "a typed refusal (FailedPrecondition, NotFound, InvalidArgument): containerd answers the create before NRI, with its own code; the proxy's"},
	{`^unknown-mode/`, "", "an unknown NamespaceMode: containerd decides before NRI; the proxy's"},
}

// unclaimed says whether the plugin mode does not claim case id, why, and
// which failure of it (when it runs at all: failure not "").
func unclaimed(id string) (reason, failure string, ok bool) {
	for _, u := range pluginUnclaimed {
		if regexp.MustCompile(u.pattern).MatchString(id) {
			return u.reason, u.failure, true
		}
	}
	return "", "", false
}

// suiteCase is a case the suite lists (--list): its id and title.
type suiteCase struct{ id, title string }

// listSuite reads the suite's cases from its --list.
func listSuite(ctx context.Context, suite string) ([]suiteCase, error) {
	out, err := exec.CommandContext(ctx, suite, "--list").Output()
	if err != nil {
		return nil, fmt.Errorf("%s --list: %w", suite, err)
	}
	return parseSuiteList(string(out)), nil
}

// parseSuiteList parses --list: a case's id, spaces, its title, a line each.
func parseSuiteList(out string) []suiteCase {
	var cs []suiteCase
	for _, l := range strings.Split(out, "\n") {
		id, title, _ := strings.Cut(strings.TrimSpace(l), " ")
		if id != "" {
			cs = append(cs, suiteCase{id, strings.TrimSpace(title)})
		}
	}
	return cs
}

// claimedCases is the suite's --cases pattern of the cases that run in the
// plugin mode, and the cases not claimed that do not.
func claimedCases(cs []suiteCase) (pattern string, notRun []suiteCase) {
	var ids []string
	for _, c := range cs {
		if _, failure, ok := unclaimed(c.id); ok && failure == "" {
			notRun = append(notRun, c)
			continue
		}
		ids = append(ids, regexp.QuoteMeta(c.id))
	}
	return "^(" + strings.Join(ids, "|") + ")$", notRun
}

// claimReport rewrites the suite's report at path for the plugin mode: a
// failure that a case's failure pattern matches becomes not claimed (its
// reason, then what the suite said), and a result is added for each case
// not run, not claimed, with its reason; never counted as skipped. It
// returns the failures it took back.
func claimReport(path string, notRun []suiteCase) (unfailed int, err error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	var r map[string]json.RawMessage
	var results []map[string]any
	if err := json.Unmarshal(raw, &r); err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	if err := json.Unmarshal(r["results"], &results); err != nil {
		return 0, fmt.Errorf("%s: results: %w", path, err)
	}
	for _, res := range results {
		id, _ := res["case"].(string)
		said, _ := res["reason"].(string)
		reason, failure, ok := unclaimed(id)
		if ok && failure != "" && res["result"] == "fail" && regexp.MustCompile(failure).MatchString(said) {
			res["result"], res["reason"] = notClaimed, "not claimed by plugin mode: "+reason+"; the suite: "+said
			unfailed++
		}
		if res["result"] == notClaimed {
			fmt.Printf("  %-40s %s\n", id, res["reason"])
		}
	}
	for _, c := range notRun {
		reason, _, _ := unclaimed(c.id)
		res := map[string]any{"case": c.id, "title": c.title, "result": notClaimed, "seconds": 0,
			"reason": "not claimed by plugin mode (not run): " + reason}
		results = append(results, res)
		fmt.Printf("  %-40s %s\n", c.id, res["reason"])
	}
	if r["results"], err = json.Marshal(results); err != nil {
		return 0, err
	}
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return 0, err
	}
	return unfailed, os.WriteFile(path, append(b, '\n'), 0o644)
}

// pluginTargeting reads, from the plugin's metrics at addr, its TARGET
// decisions for the PID namespace: "stage/result" to count.
func pluginTargeting(addr string) (map[string]float64, error) {
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, fmt.Errorf("the plugin's metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("the plugin's metrics: %s", resp.Status)
	}
	return targetingCounts(resp.Body)
}

var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

// targetingCounts sums cri_nstarget_targeting_total's PID samples of the
// plugin mode by stage, result and reason ("create/targeted/none": 3).
func targetingCounts(r io.Reader) (map[string]float64, error) {
	n := map[string]float64{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		sample, ok := strings.CutPrefix(sc.Text(), "cri_nstarget_targeting_total{")
		labels, value, ok2 := strings.Cut(sample, "} ")
		if !ok || !ok2 {
			continue
		}
		l := map[string]string{}
		for _, m := range labelRE.FindAllStringSubmatch(labels, -1) {
			l[m[1]] = m[2]
		}
		if l["mode"] != "plugin" || l["namespace"] != "pid" {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return nil, fmt.Errorf("cri_nstarget_targeting_total{%s}: %w", labels, err)
		}
		n[l["stage"]+"/"+l["result"]+"/"+l["reason"]] += v
	}
	return n, sc.Err()
}

// pinCheck says whether the plugin took part in the suite's run: it pinned
// a TARGET create (the answer NRI carried) and saw one joined after its
// start. Without it, the claimed cases that containerd passes alone would
// pass for a plugin that was never attached.
func pinCheck(n map[string]float64) error {
	var missing []string
	if n["create/targeted/none"] == 0 {
		missing = append(missing, "pinned no TARGET create (targeting_total{stage=create,result=targeted} is 0)")
	}
	if n["verify/joined/none"] == 0 {
		missing = append(missing, "saw no debug container joined after its start (targeting_total{stage=verify,result=joined} is 0)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("the plugin %s: is it attached to containerd's NRI socket?", strings.Join(missing, ", and "))
	}
	return nil
}

// runPluginSuite runs the suite on containerd's own endpoint with the
// plugin attached, less the cases not claimed that need not run, reports
// those not claimed (claimReport), and fails the run when the plugin
// pinned nothing (pinCheck).
func runPluginSuite(ctx context.Context, o runOptions, name, endpoint, image string, plugin *harness.Shim) (pass, fail int, err error) {
	cs, err := listSuite(ctx, o.suite)
	if err != nil {
		return 0, 0, err
	}
	pattern, notRun := claimedCases(cs)
	if pass, fail, err = runSuite(ctx, o, name, endpoint, image, "--cases", pattern); err != nil {
		return pass, fail, err
	}
	unfailed, err := claimReport(filepath.Join(o.out, "suite-"+name+".json"), notRun)
	if err != nil {
		return pass, fail, err
	}
	fail -= unfailed
	fmt.Printf("  suite %s: %d not claimed by plugin mode (%d of them run; their failures not counted), listed in the report\n", name, len(notRun)+unfailed, unfailed)
	n, err := pluginTargeting(harness.MetricsAddr(plugin.LogPath()))
	if err != nil {
		return pass, fail, fmt.Errorf("%s: %w", name, err)
	}
	fmt.Printf("  %s: the plugin's PID TARGET decisions (stage/result/reason): %v\n", name, n)
	if err := pinCheck(n); err != nil {
		return pass, fail, fmt.Errorf("%s: %w", name, err)
	}
	return pass, fail, nil
}
