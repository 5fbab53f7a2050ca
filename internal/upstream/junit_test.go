package upstream

import (
	"regexp"
	"testing"
	"time"
)

// A report as ginkgo v2 writes it for a focused e2e.test run: suite nodes,
// the focused specs with their label lists, and every other spec skipped.
const report = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="4" disabled="2" errors="0" failures="1" time="60.5">
  <testsuite name="Kubernetes e2e suite" package="/" tests="4" disabled="2" skipped="0" errors="0" failures="1" time="60.5">
    <properties><property name="SuiteSucceeded" value="false"></property></properties>
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="0.1"></testcase>
    <testcase name="[It] [sig-node] Ephemeral Containers will start an ephemeral container in an existing pod [Conformance] [NodeConformance] [sig-node, NodeConformance, Conformance]" classname="Kubernetes e2e suite" status="passed" time="12.25"></testcase>
    <testcase name="[It] [sig-cli] kubectl debug custom profile should be applied on static profiles while copying from pod [sig-cli]" classname="Kubernetes e2e suite" status="failed" time="30">
      <failure message="timed out waiting for the condition&#xA;more" type="failed">...</failure>
    </testcase>
    <testcase name="[It] [sig-apps] Deployment should run [Conformance] [Conformance]" classname="Kubernetes e2e suite" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
    <testcase name="[ReportAfterSuite] Kubernetes e2e suite report" classname="Kubernetes e2e suite" status="passed" time="0"></testcase>
  </testsuite>
</testsuites>`

func TestWithoutLabels(t *testing.T) {
	for _, tc := range []struct{ name, want string }{
		{"[sig-cli] kubectl debug x [sig-cli]", "[sig-cli] kubectl debug x"},
		{"[sig-node] E y [Conformance] [NodeConformance] [sig-node, NodeConformance, Conformance]", "[sig-node] E y [Conformance] [NodeConformance]"},
		{"[sig-node] E z [Slow]", "[sig-node] E z [Slow]"},
		{"[sig-node] E w [Slow] [Slow, Serial]", "[sig-node] E w [Slow] [Slow, Serial]"},
		{"plain", "plain"},
	} {
		if got := withoutLabels(tc.name); got != tc.want {
			t.Errorf("withoutLabels(%q) = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestParseJUnit(t *testing.T) {
	focus := regexp.MustCompile(`\[sig-node\] Ephemeral Containers .*\[Conformance\]|\[sig-cli\] kubectl debug`)
	got, err := ParseJUnit([]byte(report), focus)
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Spec: "[sig-node] Ephemeral Containers will start an ephemeral container in an existing pod [Conformance] [NodeConformance]", State: "passed", Time: 12250 * time.Millisecond},
		{Spec: "[sig-cli] kubectl debug custom profile should be applied on static profiles while copying from pod", State: "failed", Time: 30 * time.Second, Message: "timed out waiting for the condition"},
	}
	if len(got) != len(want) {
		t.Fatalf("ParseJUnit = %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("result %d = %+v, want %+v", i, got[i], want[i])
		}
	}
	if _, err := ParseJUnit([]byte("<testsuites"), focus); err == nil {
		t.Error("ParseJUnit of a truncated report: no error")
	}
}
