package soak

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
)

// Report is what a run found.
type Report struct {
	Duration  time.Duration
	Seed      int64
	Backend   string // e.g. containerd-2.4 (nri)
	Break     string // the broken build's tag, "" for none
	Recovery  time.Duration
	Growth    Growth
	PodsMade  int
	DebugMade int               // debug containers asked for
	Outcomes  map[Outcome]int   // judged
	Reasons   map[string]int    // "fallback target_not_running", "refused Unavailable"
	Lost      int               // pods deleted before their debug container could be judged
	Faults    map[FaultKind]int // injected
	Longest   time.Duration     // longest recovery
	LongestOf FaultKind         //
	Samples   []Sample          // after the warm-up
	APIErrors map[string]int    // the workload's apiserver errors, by call

	// Findings: each fails the run.
	WrongJoins  []string
	FaultErrors []string // a fault that did not go as it should (a shim that did not stop cleanly...)
	Unrecovered []string // not back within the bound
	Hangs       []string // calls that reached their deadline
	Leaks       []string
	Grew        []string
	Teardown    []string
}

// Failures are the findings, each one line; none for a run that passed.
func (r *Report) Failures() []string {
	var f []string
	add := func(what string, items []string) {
		for _, i := range items {
			f = append(f, what+": "+i)
		}
	}
	add("wrong join", r.WrongJoins)
	add("fault", r.FaultErrors)
	add("not recovered", r.Unrecovered)
	add("hang", r.Hangs)
	add("leak", r.Leaks)
	add("growth", r.Grew)
	add("teardown", r.Teardown)
	return f
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// Print writes the report as text, then the row of docs/reports/reliability.md's
// soak table.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "\n=== soak report ===\n")
	fmt.Fprintf(w, "duration %s, seed %d, backend %s", r.Duration, r.Seed, r.Backend)
	if r.Break != "" {
		fmt.Fprintf(w, ", BROKEN BUILD %s", r.Break)
	}
	fmt.Fprintf(w, "\npods made %d, debug containers asked for %d, judged %d (targeted and verified joined %s, fallback %d, refused %d, wrong %d), lost with their pod %d\n",
		r.PodsMade, r.DebugMade, r.judged(), r.targeted(), r.Outcomes[FellBack], r.Outcomes[Refused], r.Outcomes[WrongJoin], r.Lost)
	fmt.Fprintf(w, "reasons: %s\n", formatCounts(r.Reasons))
	fmt.Fprintf(w, "faults: %s\n", r.faults())
	fmt.Fprintf(w, "longest recovery %s (%s), bound %s\n", r.Longest.Round(100*time.Millisecond), r.LongestOf, r.Recovery)
	if len(r.Samples) > 0 {
		fmt.Fprintf(w, "shim samples (%d, bound %s):\n", len(r.Samples), r.Growth)
		for _, s := range r.Samples {
			fmt.Fprintf(w, "  +%-6s pid %-7d RSS %s, fds %d, goroutines %d\n", s.At.Round(time.Second), s.PID, mib(s.RSS), s.FDs, s.Goroutines)
		}
	}
	if len(r.APIErrors) > 0 {
		fmt.Fprintf(w, "apiserver errors of the workload (not findings): %s\n", formatCounts(r.APIErrors))
	}
	fails := r.Failures()
	if len(fails) == 0 {
		fmt.Fprintf(w, "PASSED: no wrong join, no leak, no hang, every fault recovered within %s, growth within bound\n", r.Recovery)
	} else {
		fmt.Fprintf(w, "FAILED: %d findings\n", len(fails))
		for i, f := range fails {
			if i == 40 {
				fmt.Fprintf(w, "  ... and %d more\n", len(fails)-i)
				break
			}
			fmt.Fprintf(w, "  %s\n", f)
		}
	}
	fmt.Fprintf(w, "\ndocs/reports/reliability.md row:\n%s\n", r.Row())
}

func (r *Report) judged() int {
	n := 0
	for _, v := range r.Outcomes {
		n += v
	}
	return n
}

func (r *Report) faults() string {
	var parts []string
	for _, k := range FaultKinds {
		parts = append(parts, fmt.Sprintf("%s %d", k, r.Faults[k]))
	}
	return strings.Join(parts, ", ")
}

func formatCounts(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortStrings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// Row is the run as a row of docs/reports/reliability.md's soak table: duration,
// seed, backend, pods, debug containers, targeted/fallback/refused, faults,
// wrong joins, leaks, longest recovery, RSS/fds/goroutines first and last,
// result.
func (r *Report) Row() string {
	res := "passed"
	if n := len(r.Failures()); n > 0 {
		res = fmt.Sprintf("FAILED (%d findings)", n)
	}
	var rss, fds, gs string
	if len(r.Samples) > 0 {
		a, b := r.Samples[0], r.Samples[len(r.Samples)-1]
		rss = fmt.Sprintf("%s / %s", mib(a.RSS), mib(b.RSS))
		fds = fmt.Sprintf("%d / %d", a.FDs, b.FDs)
		gs = fmt.Sprintf("%d / %d", a.Goroutines, b.Goroutines)
	}
	name := r.Backend
	if r.Break != "" {
		name += ", " + r.Break
	}
	return fmt.Sprintf("| %s | %d | %s | %d | %d | %s / %d / %d | %s | %d | %d | %s | %s | %s | %s | %s |",
		r.Duration, r.Seed, name, r.PodsMade, r.DebugMade, r.targeted(), r.Outcomes[FellBack], r.Outcomes[Refused],
		r.faults(), len(r.WrongJoins), len(r.Leaks), r.Longest.Round(100*time.Millisecond), rss, fds, gs, res)
}

// targeted counts the debug containers that joined their target, and
// those of them that died with it before they printed.
func (r *Report) targeted() string {
	n := strconv.Itoa(r.Outcomes[Joined] + r.Outcomes[DiedWithTarget])
	if d := r.Outcomes[DiedWithTarget]; d > 0 {
		n += fmt.Sprintf(" (%d died with their target)", d)
	}
	if u := r.Outcomes[Unseen]; u > 0 {
		n += fmt.Sprintf(" + %d joined but not seen by the shim (exited before it could look)", u)
	}
	return n
}
