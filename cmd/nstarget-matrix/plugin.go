package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/cri-nstarget/cri-nstarget/conformance/claims"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

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
// plugin attached, with --mode plugin: the suite itself reports the cases
// the plugin mode does not claim (conformance/claims), and checks that
// containerd's spec of each PID TARGET debug container names the plugin's
// pin. The run fails, too, when the plugin's metrics say it pinned nothing
// or saw no join (pinCheck).
func runPluginSuite(ctx context.Context, o runOptions, name, endpoint, image string, plugin *harness.Shim) (pass, fail int, err error) {
	if pass, fail, err = runSuite(ctx, o, name, endpoint, image, "--mode", claims.ModePlugin); err != nil {
		return pass, fail, err
	}
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
