package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/cri-nstarget/cri-nstarget/internal/critest"

	"github.com/cri-nstarget/cri-nstarget/conformance/claims"
)

// The generated part of the docs page sits between these lines.
const (
	beginMarker = "<!-- BEGIN nstarget-matrix report: generated, do not edit -->"
	endMarker   = "<!-- END nstarget-matrix report -->"
)

// suiteReport mirrors conformance.Report (the suite's JSON report).
type suiteReport struct {
	Label          string        `json:"label"`
	RuntimeName    string        `json:"runtimeName"`
	RuntimeVersion string        `json:"runtimeVersion"`
	Results        []suiteResult `json:"results"`
}

// suiteResult mirrors conformance.Result; a plugin-mode run's report also
// has the result not-claimed (the suite with --mode plugin; conformance/claims).
type suiteResult struct {
	Case      string  `json:"case"`
	Title     string  `json:"title"`
	Result    string  `json:"result"`
	Behaviour string  `json:"behaviour"`
	Reason    string  `json:"reason"`
	Seconds   float64 `json:"seconds"`
}

func reportCmd(args []string) error {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	docs := fs.String("docs", "", "rewrite the generated block of this markdown file (default: print the block)")
	readme := fs.String("readme", "", "rewrite the generated block of this markdown file (README.md) with the suite's cases on --readme-backend: containerd alone, the proxy, the plugin mode")
	readmeBackend := fs.String("readme-backend", "containerd-2.4", "the backend of the --readme table")
	known := fs.String("critest-known-failures", "hack/critest/known-failures.txt", "why critest specs fail directly (REGEXP | reason)")
	fs.Parse(args)
	if fs.NArg() != 1 {
		return fmt.Errorf("report: want the reports directory")
	}
	reasons, err := readSkipList(*known)
	if err != nil {
		return err
	}
	block, err := renderReport(fs.Arg(0), reasons)
	if err != nil {
		return err
	}
	if *readme != "" {
		rb, err := renderReadme(fs.Arg(0), *readmeBackend)
		if err != nil {
			return err
		}
		if err := replaceBlock(*readme, readmeBegin, readmeEnd, rb); err != nil {
			return err
		}
	}
	if *docs == "" {
		fmt.Print(block)
		return nil
	}
	return replaceBlock(*docs, beginMarker, endMarker, block)
}

// replaceBlock rewrites the markdown file at path with block (which begins
// with begin and ends with end) in place of its block from begin to end.
func replaceBlock(path, begin, end, block string) error {
	page, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	i, j := bytes.Index(page, []byte(begin)), bytes.Index(page, []byte(end))
	if i < 0 || j < i {
		return fmt.Errorf("%s has no %q ... %q block", path, begin, end)
	}
	out := append(append(append([]byte(nil), page[:i]...), block...), page[j+len(end):]...)
	return os.WriteFile(path, out, 0o644)
}

// runOrder sorts run names: by backend, direct before shim.
func runOrder(a, b string) int {
	ab, am := splitRun(a)
	bb, bm := splitRun(b)
	if c := strings.Compare(ab, bb); c != 0 {
		return c
	}
	return strings.Compare(am, bm) // "direct" < "shim"
}

func splitRun(name string) (backend, mode string) {
	for _, m := range []string{"shim-strict", "shim-update", "direct", "shim", "plugin"} {
		if b, ok := strings.CutSuffix(name, "-"+m); ok {
			return b, m
		}
	}
	return name, ""
}

// readSuiteReports reads the suite's reports in dir: by run name (its
// label), the run names, and the cases in the order they ran, with their
// titles.
func readSuiteReports(dir string) (reports map[string]suiteReport, runs, cases []string, titles map[string]string, err error) {
	files, _ := filepath.Glob(filepath.Join(dir, "suite-*.json"))
	reports, titles = map[string]suiteReport{}, map[string]string{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, nil, nil, err
		}
		var r suiteReport
		if err := json.Unmarshal(raw, &r); err != nil {
			return nil, nil, nil, nil, fmt.Errorf("%s: %w", f, err)
		}
		name := r.Label
		if name == "" {
			name = strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "suite-"), ".json")
		}
		reports[name] = r
		runs = append(runs, name)
		for _, res := range r.Results {
			if !slices.Contains(cases, res.Case) {
				cases = append(cases, res.Case)
				titles[res.Case] = res.Title
			}
		}
	}
	slices.SortFunc(runs, runOrder)
	return reports, runs, cases, titles, nil
}

func renderReport(dir string, reasons []skipEntry) (string, error) {
	var b strings.Builder
	b.WriteString(beginMarker + "\n")

	reports, runs, cases, titles, err := readSuiteReports(dir)
	if err != nil {
		return "", err
	}
	slices.SortFunc(runs, runOrder)
	if len(runs) > 0 {
		b.WriteString("\n### TARGET suite (`conformance/`)\n\n")
		b.WriteString("| case | " + strings.Join(runs, " | ") + " |\n|---|" + strings.Repeat("---|", len(runs)) + "\n")
		for _, c := range cases {
			row := []string{"`" + c + "`"}
			for _, run := range runs {
				row = append(row, cell(reports[run], c))
			}
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
		}
		b.WriteString("| **passed / failed / skipped** |")
		for _, run := range runs {
			b.WriteString(" " + tally(reports[run]) + " |")
		}
		b.WriteString("\n\nRuntime versions (CRI `Version`): ")
		var vs []string
		for _, run := range runs {
			vs = append(vs, fmt.Sprintf("%s: %s %s", run, reports[run].RuntimeName, reports[run].RuntimeVersion))
		}
		b.WriteString(strings.Join(vs, "; ") + ".\n")

		b.WriteString("\n#### What happened, case by case\n\n")
		b.WriteString("Runs that saw the same thing share a line (ids and PIDs elided).\n\n")
		for _, c := range cases {
			fmt.Fprintf(&b, "- `%s`: %s\n", c, titles[c])
			var texts []string
			byText := map[string][]string{}
			for _, run := range runs {
				for _, res := range reports[run].Results {
					if res.Case != c {
						continue
					}
					detail := res.Behaviour
					if res.Reason != "" {
						detail = strings.TrimSuffix(res.Reason+". Saw: "+res.Behaviour, ". Saw: ")
					}
					text := "**" + res.Result + "**: " + mdEscape(elide(detail))
					if byText[text] == nil {
						texts = append(texts, text)
					}
					byText[text] = append(byText[text], run)
				}
			}
			for _, text := range texts {
				fmt.Fprintf(&b, "  - %s: %s\n", strings.Join(byText[text], ", "), text)
			}
		}
	}

	junits, _ := filepath.Glob(filepath.Join(dir, "critest-*.xml"))
	var critRuns []string
	crit := map[string]junitResult{}
	for _, f := range junits {
		r, err := readJUnit(f)
		if err != nil {
			return "", err
		}
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "critest-"), ".xml")
		crit[name] = r
		critRuns = append(critRuns, name)
	}
	slices.SortFunc(critRuns, runOrder)
	if len(critRuns) > 0 {
		fmt.Fprintf(&b, "\n### critest %s\n\n| run | passed | failed | skipped | time |\n|---|---|---|---|---|\n", critest.Version(critest.GoMod))
		for _, run := range critRuns {
			r := crit[run]
			fmt.Fprintf(&b, "| %s | %d | %d | %d | %.0f s |\n", run, len(r.Passed), len(r.Failed), len(r.Skipped), r.Seconds)
		}
		b.WriteString("\n")
		for _, run := range critRuns {
			backend, mode := splitRun(run)
			if mode != "direct" {
				continue
			}
			other, ok := crit[backend+"-shim"]
			if !ok {
				continue
			}
			d := compareJUnit(crit[run], other)
			if d.Same() {
				fmt.Fprintf(&b, "- %s parity: the same %d specs pass directly and through the shim.\n", backend, len(crit[run].Passed))
			} else {
				fmt.Fprintf(&b, "- %s parity: **differs**; passing only directly: %s; only through the shim: %s.\n", backend, quoteList(d.onlyBase), quoteList(d.onlyOther))
			}
			if len(crit[run].Failed) > 0 {
				fmt.Fprintf(&b, "  Failing directly (and so expected through the shim), each with its reason:\n")
				for _, spec := range crit[run].Failed {
					fmt.Fprintf(&b, "  - “%s”: %s\n", spec, failureReason(reasons, spec))
				}
			}
		}
	}
	b.WriteString(endMarker)
	return b.String(), nil
}

var (
	longID   = regexp.MustCompile(`\b[0-9a-f]{64}\b`)
	hostPID  = regexp.MustCompile(`PID \d+`)
	clipped  = regexp.MustCompile(`"[0-9a-f]{20,}\.\.\.`)
	maxChars = 300
)

// elide drops what differs between runs for the same behaviour (container
// ids, PIDs) and clips long messages.
func elide(s string) string {
	s = longID.ReplaceAllString(s, "…")
	s = clipped.ReplaceAllString(s, `"…`)
	s = hostPID.ReplaceAllString(s, "PID N")
	if len(s) > maxChars {
		s = s[:maxChars] + "…"
	}
	return s
}

func cell(r suiteReport, c string) string {
	for _, res := range r.Results {
		if res.Case == c {
			switch res.Result {
			case "pass":
				return "pass"
			case "fail":
				return "**FAIL**"
			case claims.NotClaimed:
				return "not claimed"
			default:
				return res.Result
			}
		}
	}
	return "–"
}

// tally is a run's passed / failed / skipped, and the cases not claimed
// (plugin mode) when there are any.
func tally(r suiteReport) string {
	n := map[string]int{}
	for _, res := range r.Results {
		n[res.Result]++
	}
	s := fmt.Sprintf("%d / %d / %d", n["pass"], n["fail"], n["skip"])
	if n[claims.NotClaimed] > 0 {
		s += fmt.Sprintf(" (%d not claimed)", n[claims.NotClaimed])
	}
	return s
}

// failureReason is the reason recorded for a spec that fails directly.
func failureReason(reasons []skipEntry, spec string) string {
	for _, r := range reasons {
		if ok, _ := regexp.MatchString(r.pattern, spec); ok {
			return r.reason
		}
	}
	return "**no reason recorded** (hack/critest/known-failures.txt)"
}

func quoteList(l []string) string {
	if len(l) == 0 {
		return "none"
	}
	var q []string
	for _, s := range l {
		q = append(q, "“"+mdEscape(s)+"”")
	}
	return strings.Join(q, ", ")
}

func mdEscape(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", `\|`)
	return s
}
