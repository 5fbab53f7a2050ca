package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/cri-nstarget/cri-nstarget/conformance/claims"
)

// The README's generated table (report --readme) sits between these lines.
const (
	readmeBegin = "<!-- BEGIN nstarget-matrix readme: generated, do not edit -->"
	readmeEnd   = "<!-- END nstarget-matrix readme -->"
)

// readmeColumns are the README's columns: the backend's runs of the suite
// containerd alone, through the proxy, and with the plugin attached.
var readmeColumns = []struct{ mode, head string }{
	{"direct", "containerd alone"},
	{"shim", "proxy"},
	{"plugin", "plugin mode"},
}

// renderReadme is the README's table of the suite on backend, a column per
// mode, from the reports in dir: the plugin mode's cases not claimed are
// listed under it, each with its reason. It needs the plugin mode's run.
func renderReadme(dir, backend string) (string, error) {
	reports, _, cases, _, err := readSuiteReports(dir)
	if err != nil {
		return "", err
	}
	plugin, ok := reports[backend+"-plugin"]
	if !ok {
		return "", fmt.Errorf("readme: no run %s-plugin in %s (nstarget-matrix run --modes ...,plugin)", backend, dir)
	}
	var b strings.Builder
	b.WriteString(readmeBegin + "\n")
	fmt.Fprintf(&b, "| case | %s |\n|---|%s\n", strings.Join(heads(), " | "), strings.Repeat("---|", len(readmeColumns)))
	for _, c := range cases {
		row := []string{"`" + c + "`"}
		for _, col := range readmeColumns {
			row = append(row, cellOrNone(reports, backend+"-"+col.mode, c))
		}
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
	b.WriteString("| **passed / failed / skipped** |")
	for _, col := range readmeColumns {
		r, ok := reports[backend+"-"+col.mode]
		if !ok {
			b.WriteString(" not run |")
			continue
		}
		b.WriteString(" " + tally(r) + " |")
	}
	fmt.Fprintf(&b, "\n\n%s: %s %s; the runs direct, shim and plugin of `nstarget-matrix run`, as make test's conformance leg makes them. Not claimed by the plugin mode, and why:\n\n",
		backend, plugin.RuntimeName, plugin.RuntimeVersion)
	var reasons []string
	byReason := map[string][]string{}
	for _, res := range plugin.Results {
		if res.Result != claims.NotClaimed {
			continue
		}
		reason := claims.ReasonOf(res.Reason)
		if byReason[reason] == nil {
			reasons = append(reasons, reason)
		}
		byReason[reason] = append(byReason[reason], "`"+res.Case+"`")
	}
	for _, r := range reasons {
		fmt.Fprintf(&b, "- %s: %s.\n", strings.Join(byReason[r], ", "), mdEscape(r))
	}
	b.WriteString(readmeEnd)
	return b.String(), nil
}

func heads() []string {
	var h []string
	for _, col := range readmeColumns {
		h = append(h, col.head)
	}
	return h
}

// cellOrNone is case c's cell in run, or "not run" when there is no run.
func cellOrNone(reports map[string]suiteReport, run, c string) string {
	r, ok := reports[run]
	if !ok || !slices.ContainsFunc(r.Results, func(res suiteResult) bool { return res.Case == c }) {
		return "not run"
	}
	return cell(r, c)
}
