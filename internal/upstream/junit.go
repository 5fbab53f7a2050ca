package upstream

import (
	"encoding/xml"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Result is one spec of an e2e.test run.
type Result struct {
	Spec  string        // the spec's text, e.g. "[sig-node] Ephemeral Containers will start ..."
	State string        // ginkgo's: passed, failed, skipped, pending, panicked, interrupted, timedout
	Time  time.Duration // as the report gives it
	// Message is the failure's (or the skip's) message, first line.
	Message string
}

// Passed reports whether the spec passed.
func (r Result) Passed() bool { return r.State == "passed" }

// junitSuites is the part of ginkgo's JUnit report read here.
type junitSuites struct {
	Suites []struct {
		Cases []struct {
			Name    string  `xml:"name,attr"`
			Status  string  `xml:"status,attr"`
			Time    float64 `xml:"time,attr"`
			Failure *struct {
				Message string `xml:"message,attr"`
			} `xml:"failure"`
			Error *struct {
				Message string `xml:"message,attr"`
			} `xml:"error"`
			Skipped *struct {
				Message string `xml:"message,attr"`
			} `xml:"skipped"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

// labelsRE is the label list ginkgo appends to a spec's name in its JUnit
// report: "[sig-node, NodeConformance, Conformance]", "[sig-cli]".
var labelsRE = regexp.MustCompile(` \[([^\[\]]*)\]$`)

// withoutLabels is name less the label list ginkgo appended: a last
// bracketed list each of whose items is also a tag in the text before it
// (Kubernetes' labels repeat the text's tags). A spec whose text merely ends
// in a tag keeps it.
func withoutLabels(name string) string {
	m := labelsRE.FindStringSubmatchIndex(name)
	if m == nil {
		return name
	}
	text := name[:m[0]]
	for _, l := range strings.Split(name[m[2]:m[3]], ", ") {
		if !strings.Contains(text, "["+l+"]") {
			return name
		}
	}
	return text
}

// ParseJUnit reads the specs (It nodes) of ginkgo's JUnit report whose text
// matches focus: the report lists every spec of e2e.test, those left out
// by the focus as skipped. Suite nodes (BeforeSuite, ReportAfterSuite) are
// not specs and are left out.
func ParseJUnit(report []byte, focus *regexp.Regexp) ([]Result, error) {
	var suites junitSuites
	if err := xml.Unmarshal(report, &suites); err != nil {
		return nil, fmt.Errorf("parse JUnit report: %w", err)
	}
	var results []Result
	for _, s := range suites.Suites {
		for _, c := range s.Cases {
			spec, ok := strings.CutPrefix(c.Name, "[It] ")
			if !ok {
				continue
			}
			spec = withoutLabels(spec)
			if !focus.MatchString(spec) {
				continue
			}
			r := Result{Spec: spec, State: c.Status, Time: time.Duration(c.Time * float64(time.Second))}
			switch {
			case c.Failure != nil:
				r.Message = c.Failure.Message
			case c.Error != nil:
				r.Message = c.Error.Message
			case c.Skipped != nil:
				r.Message = c.Skipped.Message
			}
			r.Message, _, _ = strings.Cut(strings.TrimSpace(r.Message), "\n")
			results = append(results, r)
		}
	}
	return results, nil
}
