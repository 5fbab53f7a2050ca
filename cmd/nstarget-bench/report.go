package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The sides a measure alternates between, in table order.
const (
	sideDirect   = iota // containerd's CRI socket
	sideShim            // cri-nstarget in front of it
	sideSplice          // a byte splice in front of it: the floor of any proxy
	sideBaseline        // another cri-nstarget binary in front of it (-baseline-binary): the old shim
	nSides
)

var sideNames = [nSides]string{"direct", "shim", "splice", "baseline"}

// result is one row of the details table.
type result struct {
	measure string
	sides   [nSides]stats // n == 0: not measured on that side
	figure  string        // what the row shows, in a few words
}

// verdict is the last column of the summary table.
type verdict string

const (
	met      verdict = "met"
	missed   verdict = "missed"
	reported verdict = "reported" // a figure without a target
	noBound  verdict = "n/a"      // the target depends on a floor that was not above zero
)

// outcome is what a run measured for one figure of the summary table.
type outcome struct {
	measured string
	verdict  verdict
}

// The figures of the summary table (issue 10, item 7), in its order.
const (
	figLifecycle    = "pod lifecycle (7 calls), shim/direct p50"
	figVersionP50   = "unary added latency p50, Version"
	figVersionP99   = "unary added latency p99, Version"
	figStatusP50    = "unary added latency p50, ContainerStatus"
	figStatusP99    = "unary added latency p99, ContainerStatus"
	figList300      = "ListContainers at 300 containers, added p50"
	figThroughput   = "64-client throughput, shim/direct"
	figRSS          = "shim RSS under that load (peak)"
	figCPU          = "shim CPU time per 1,000 relayed calls, under that load"
	figTarget       = "debug container create+start, pid TARGET: shim p50 − containerd's own p50"
	figTargetNRI    = "the same, the shim on the NRI path (containerd 2.2+)"
	figTargetUpdate = "the same, a shim forced onto the Update path"
	figHop          = "the proxy's hop in those rounds: Version through the shim − direct"
	figHopGC        = "the shim's garbage collection over those rounds"
	listAtHeadline  = 300 // containers, for figList300
	clientsHeadline = 64  // clients, for figThroughput
)

var headline = []struct{ name, target string }{
	{figLifecycle, "≤ 1.02"},
	{figVersionP50, "≤ 2× the splice's added p50"},
	{figVersionP99, "≤ 4× the splice's added p99"},
	{figStatusP50, "≤ 2× the splice's added p50"},
	{figStatusP99, "≤ 4× the splice's added p99"},
	{figList300, "≤ 2× the splice's added p50"},
	{figThroughput, "≥ 0.90"},
	{figRSS, "≤ 25 MiB"},
	{figCPU, "reported"},
	{figTarget, "≤ +2 ms"},
	{figTargetNRI, "≤ +1 ms"},
	{figTargetUpdate, "reported"},
	{figHop, "reported"},
	{figHopGC, "reported"},
}

// atMost is v against a ceiling, v printed with format.
func atMost(format string, v, limit float64) outcome {
	return outcome{fmt.Sprintf(format, v), judge(v <= limit)}
}

// atLeast is v against a floor, v printed with format.
func atLeast(format string, v, limit float64) outcome {
	return outcome{fmt.Sprintf(format, v), judge(v >= limit)}
}

func judge(ok bool) verdict {
	if ok {
		return met
	}
	return missed
}

// vsFloor judges the latency the shim adds to a direct call against k times
// what the splice adds in the same run. When the splice adds nothing (noise
// can put its p99 under the direct one), no bound follows from it: the
// figure is met only if the shim adds nothing either.
func vsFloor(shimAdded, spliceAdded time.Duration, k float64) outcome {
	m := signed(shimAdded) + " (splice " + signed(spliceAdded)
	switch {
	case spliceAdded > 0:
		r := float64(shimAdded) / float64(spliceAdded)
		return outcome{m + fmt.Sprintf(": %.2f×)", r), judge(r <= k)}
	case shimAdded <= 0:
		return outcome{m + ")", met}
	default:
		return outcome{m + ", no bound from it)", noBound}
	}
}

// signed is d rounded, with its sign.
func signed(d time.Duration) string {
	if d < 0 {
		return round(d).String()
	}
	return "+" + round(d).String()
}

// summaryTable is the table of issue 10's item 7: every headline figure, in
// order, measured or not. With a baseline (base not nil), the old shim's
// value of each stands beside the shim's, computed the same way; the
// verdict is the shim's.
func summaryTable(got, base map[string]outcome) string {
	cols := []string{"figure", "target", "measured", "met/missed"}
	if base != nil {
		cols = slices.Insert(cols, 3, "baseline (old)")
	}
	var b strings.Builder
	b.WriteString(header(cols...))
	for _, h := range headline {
		o, ok := got[h.name]
		if !ok {
			o = outcome{"not measured in this run", "–"}
		}
		cells := []string{h.name, h.target, o.measured, string(o.verdict)}
		if base != nil {
			old, ok := base[h.name]
			if !ok {
				old.measured = "–"
			}
			cells = slices.Insert(cells, 3, old.measured)
		}
		b.WriteString(row(cells...))
	}
	return b.String()
}

// detailTable is every measure's min / p50 / p99 on the first n sides.
func detailTable(results []result, n int) string {
	cols := []string{"measure"}
	for _, name := range sideNames[:n] {
		cols = append(cols, name+" min / p50 / p99")
	}
	var b strings.Builder
	b.WriteString(header(append(cols, "figure")...))
	for _, r := range results {
		cells := []string{r.measure}
		for _, s := range r.sides[:n] {
			cells = append(cells, s.String())
		}
		b.WriteString(row(append(cells, r.figure)...))
	}
	return b.String()
}

// header is a markdown table's first two lines.
func header(cols ...string) string {
	return row(cols...) + strings.Repeat("|---", len(cols)) + "|\n"
}

// row is one line of a markdown table.
func row(cells ...string) string {
	return "| " + strings.Join(cells, " | ") + " |\n"
}

// machine is what the summary says about where it ran.
type machine struct {
	cpus       int
	cpuModel   string
	memory     string // e.g. "24 GiB"
	kernel     string
	os         string
	containerd string // the CRI Version answer, and whether private
	shim       string // its --version and sha256, or how it was reached
	baseline   string // the baseline's --version and sha256; "": none
	stateDir   string // where the shims' state dir is, when the bench made it
	splice     string
}

func (m machine) String() string {
	facts := []string{strconv.Itoa(m.cpus) + " CPUs (nproc)"}
	for _, f := range []string{m.cpuModel, m.memory, m.os} {
		if f != "" {
			facts = append(facts, f)
		}
	}
	if m.kernel != "" {
		facts = append(facts, "kernel "+m.kernel)
	}
	s := "- machine: " + strings.Join(facts, ", ") + "\n" +
		"- containerd: " + m.containerd + "\n" +
		"- shim: " + m.shim + stateDirNote(m.stateDir) + "\n"
	if m.baseline != "" {
		s += "- baseline (old): " + m.baseline + stateDirNote(m.stateDir) + "\n"
	}
	return s + "- splice (the floor): " + m.splice + "\n"
}

func stateDirNote(where string) string {
	if where == "" {
		return ""
	}
	return "; state dir on " + where
}

// commandLine is args as a shell would take them back.
func commandLine(args []string) string {
	parts := []string{"nstarget-bench"}
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`*?[]{}()<>|&;#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts = append(parts, a)
	}
	return strings.Join(parts, " ")
}

// summary is what a run ends with: pasted as is into docs/reports/benchmarks.md.
// base is the baseline's figures, nil without one.
func summary(command string, m machine, when time.Time, took time.Duration, got, base map[string]outcome) string {
	return fmt.Sprintf("Command: `%s` (%s, %s)\n\n%s\n%s", command,
		when.UTC().Format("2006-01-02 15:04 UTC"), took.Round(time.Second), m, summaryTable(got, base))
}
