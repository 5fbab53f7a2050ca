package upstream

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Backend is one backend's parity rows (Pair), for Markdown.
type Backend struct {
	Label string // "containerd-2.4"
	Rows  []Row
}

// Reason says why the specs matching Pattern do not pass directly on a
// backend here (a known-failures file's "REGEXP | reason" line).
type Reason struct {
	Pattern *regexp.Regexp
	Text    string
}

// Markdown renders backends as one table (a row per spec; for each
// backend the state directly / through the shim and the two times) and a
// list of the specs that did not pass directly somewhere, each with its
// reason: the first of reasons whose pattern matches the spec, else a
// skipped spec's own skip message. A spec that failed directly with no
// reason, or whose parity is broken, is an error after the rendering: the
// table must explain every spec that does not pass.
func Markdown(backends []Backend, reasons []Reason) (string, error) {
	specs := map[string]map[string]Row{} // spec, backend label -> row
	for _, b := range backends {
		for _, r := range b.Rows {
			if specs[r.Spec] == nil {
				specs[r.Spec] = map[string]Row{}
			}
			specs[r.Spec][b.Label] = r
		}
	}
	names := make([]string, 0, len(specs))
	for s := range specs {
		names = append(names, s)
	}
	sort.Strings(names)

	var b strings.Builder
	for _, be := range backends {
		passed, shimPassed, broken := 0, 0, 0
		for _, r := range be.Rows {
			if r.Direct.Passed() {
				passed++
			}
			if r.Shim.Passed() {
				shimPassed++
			}
			if r.Broken() {
				broken++
			}
		}
		verdict := "parity holds"
		if broken > 0 {
			verdict = fmt.Sprintf("**parity broken for %d**", broken)
		}
		fmt.Fprintf(&b, "- %s: %d specs; %d pass directly, %d through the shim; %s.\n", be.Label, len(be.Rows), passed, shimPassed, verdict)
	}
	b.WriteString("\n| spec |")
	for _, be := range backends {
		fmt.Fprintf(&b, " %s direct / shim | time |", be.Label)
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|---|", len(backends)))
	b.WriteString("\n")
	var notes []string
	var errs []string
	for _, s := range names {
		fmt.Fprintf(&b, "| `%s` |", escapeCell(s))
		var why []note
		for _, be := range backends {
			r, ok := specs[s][be.Label]
			if !ok {
				b.WriteString(" absent | - |")
				continue
			}
			mark := ""
			if r.Broken() {
				mark = " **broken**"
				errs = append(errs, fmt.Sprintf("%s: %s passes directly, not through the shim", be.Label, s))
			}
			fmt.Fprintf(&b, " %s / %s%s | %s / %s |", state(r.Direct), state(r.Shim), mark, seconds(r.Direct), seconds(r.Shim))
			if r.Direct.Passed() {
				continue
			}
			reason := reasonFor(s, reasons)
			if reason == "" && r.Direct.State == "skipped" && r.Direct.Message != "" {
				reason = "skipped by the spec: " + r.Direct.Message
			}
			if reason == "" {
				reason = "NO REASON RECORDED"
				errs = append(errs, fmt.Sprintf("%s: %s is %s directly with no reason (%s)", be.Label, s, state(r.Direct), r.Direct.Message))
			}
			why = addNote(why, be.Label, fmt.Sprintf("%s directly, %s through the shim: %s", state(r.Direct), state(r.Shim), reason))
		}
		b.WriteString("\n")
		if len(why) > 0 {
			parts := make([]string, len(why))
			for i, n := range why {
				parts[i] = strings.Join(n.labels, " and ") + " " + n.text
			}
			notes = append(notes, fmt.Sprintf("- `%s`: %s.", escapeCell(s), strings.Join(parts, "; ")))
		}
	}
	if len(notes) > 0 {
		b.WriteString("\nThe specs that do not pass directly, and why:\n\n")
		b.WriteString(strings.Join(notes, "\n"))
		b.WriteString("\n")
	}
	if len(errs) > 0 {
		return b.String(), fmt.Errorf("%d specs unexplained or broken:\n%s", len(errs), strings.Join(errs, "\n"))
	}
	return b.String(), nil
}

// note is what befell one spec ("failed directly, failed through the
// shim: REASON") on the backends named by labels.
type note struct {
	labels []string
	text   string
}

// addNote adds label to the note with the same text, so that a spec which
// fails alike on several backends has its reason written once.
func addNote(notes []note, label, text string) []note {
	for i := range notes {
		if notes[i].text == text {
			notes[i].labels = append(notes[i].labels, label)
			return notes
		}
	}
	return append(notes, note{[]string{label}, text})
}

func reasonFor(spec string, reasons []Reason) string {
	for _, r := range reasons {
		if r.Pattern.MatchString(spec) {
			return r.Text
		}
	}
	return ""
}

// escapeCell keeps a spec's text inside one Markdown table cell.
func escapeCell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "`", "'")
}
