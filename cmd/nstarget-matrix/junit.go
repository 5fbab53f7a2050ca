package main

import (
	"encoding/xml"
	"fmt"
	"os"
	"slices"
	"strings"
)

// junitSuites is the part of ginkgo's JUnit report this command reads.
type junitSuites struct {
	Suites []struct {
		Time  float64     `xml:"time,attr"`
		Cases []junitCase `xml:"testcase"`
	} `xml:"testsuite"`
}

type junitCase struct {
	Name    string    `xml:"name,attr"`
	Status  string    `xml:"status,attr"` // ginkgo v2: passed, failed, skipped, pending, ...
	Failure *struct{} `xml:"failure"`
	Error   *struct{} `xml:"error"`
	Skipped *struct{} `xml:"skipped"`
}

// junitResult is a report reduced to spec names by outcome.
type junitResult struct {
	Passed, Failed, Skipped []string
	Seconds                 float64
	Retried                 []string // passed, but only on a later attempt (ginkgo's JSON report)
}

// specName drops ginkgo's "[It] " prefix.
func specName(n string) string { return strings.TrimPrefix(n, "[It] ") }

func readJUnit(path string) (junitResult, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return junitResult{}, fmt.Errorf("read junit report: %w", err)
	}
	return parseJUnit(b)
}

func parseJUnit(b []byte) (junitResult, error) {
	var s junitSuites
	if err := xml.Unmarshal(b, &s); err != nil {
		return junitResult{}, fmt.Errorf("parse junit report: %w", err)
	}
	var r junitResult
	for _, suite := range s.Suites {
		r.Seconds += suite.Time
		for _, c := range suite.Cases {
			name := specName(c.Name)
			if strings.HasPrefix(name, "[SynchronizedBeforeSuite]") || strings.HasPrefix(name, "[BeforeSuite]") ||
				strings.HasPrefix(name, "[AfterSuite]") || strings.HasPrefix(name, "[SynchronizedAfterSuite]") || strings.HasPrefix(name, "[ReportAfterSuite]") {
				if c.Failure != nil || c.Error != nil || c.Status == "failed" {
					r.Failed = append(r.Failed, name)
				}
				continue
			}
			switch {
			case c.Failure != nil || c.Error != nil || c.Status == "failed" || c.Status == "panicked" || c.Status == "timedout" || c.Status == "aborted" || c.Status == "interrupted":
				r.Failed = append(r.Failed, name)
			case c.Skipped != nil || c.Status == "skipped" || c.Status == "pending":
				r.Skipped = append(r.Skipped, name)
			default:
				r.Passed = append(r.Passed, name)
			}
		}
	}
	for _, l := range [][]string{r.Passed, r.Failed, r.Skipped} {
		slices.Sort(l)
	}
	return r, nil
}

// junitDiff is how two reports' passing sets differ.
type junitDiff struct {
	base, other         junitResult
	onlyBase, onlyOther []string // passing in one only
}

func compareJUnit(base, other junitResult) junitDiff {
	d := junitDiff{base: base, other: other}
	for _, n := range base.Passed {
		if !slices.Contains(other.Passed, n) {
			d.onlyBase = append(d.onlyBase, n)
		}
	}
	for _, n := range other.Passed {
		if !slices.Contains(base.Passed, n) {
			d.onlyOther = append(d.onlyOther, n)
		}
	}
	return d
}

// Same reports whether the same specs passed in both.
func (d junitDiff) Same() bool { return len(d.onlyBase) == 0 && len(d.onlyOther) == 0 }

func (d junitDiff) String(baseName, otherName string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d pass, %d fail, %d skip\n", baseName, len(d.base.Passed), len(d.base.Failed), len(d.base.Skipped))
	fmt.Fprintf(&b, "%s: %d pass, %d fail, %d skip\n", otherName, len(d.other.Passed), len(d.other.Failed), len(d.other.Skipped))
	if d.Same() {
		fmt.Fprintf(&b, "parity: the same %d specs pass in both\n", len(d.base.Passed))
		return b.String()
	}
	for _, n := range d.onlyBase {
		fmt.Fprintf(&b, "parity: passes only in %s: %s\n", baseName, n)
	}
	for _, n := range d.onlyOther {
		fmt.Fprintf(&b, "parity: passes only in %s: %s\n", otherName, n)
	}
	return b.String()
}
