package main

import (
	"slices"
	"strings"
	"testing"
)

const junitSample = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5" failures="1">
  <testsuite name="CRI validation" tests="5" time="12.5">
    <testcase name="[BeforeSuite]" status="passed" time="0.1"></testcase>
    <testcase name="[It] [k8s.io] A passes" status="passed" time="1"></testcase>
    <testcase name="[It] [k8s.io] B fails" status="failed" time="1"><failure message="boom" type="failed">boom</failure></testcase>
    <testcase name="[It] [k8s.io] C is skipped" status="skipped" time="0"><skipped message="skipped"></skipped></testcase>
    <testcase name="[It] [k8s.io] D passes" status="passed" time="1"></testcase>
  </testsuite>
</testsuites>`

func TestParseJUnit(t *testing.T) {
	r, err := parseJUnit([]byte(junitSample))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"[k8s.io] A passes", "[k8s.io] D passes"}; !slices.Equal(r.Passed, want) {
		t.Errorf("passed = %q, want %q", r.Passed, want)
	}
	if want := []string{"[k8s.io] B fails"}; !slices.Equal(r.Failed, want) {
		t.Errorf("failed = %q, want %q", r.Failed, want)
	}
	if want := []string{"[k8s.io] C is skipped"}; !slices.Equal(r.Skipped, want) {
		t.Errorf("skipped = %q, want %q", r.Skipped, want)
	}
	if r.Seconds != 12.5 {
		t.Errorf("seconds = %v", r.Seconds)
	}
}

func TestCompareJUnit(t *testing.T) {
	base := junitResult{Passed: []string{"a", "b"}, Failed: []string{"c"}}
	tests := []struct {
		desc      string
		other     junitResult
		same      bool
		onlyBase  []string
		onlyOther []string
	}{
		{"same passing set, different failures", junitResult{Passed: []string{"a", "b"}, Skipped: []string{"c"}}, true, nil, nil},
		{"one fewer", junitResult{Passed: []string{"a"}, Failed: []string{"b", "c"}}, false, []string{"b"}, nil},
		{"one more", junitResult{Passed: []string{"a", "b", "c"}}, false, nil, []string{"c"}},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			d := compareJUnit(base, tc.other)
			if d.Same() != tc.same || !slices.Equal(d.onlyBase, tc.onlyBase) || !slices.Equal(d.onlyOther, tc.onlyOther) {
				t.Errorf("compare = same %v, only base %q, only other %q", d.Same(), d.onlyBase, d.onlyOther)
			}
			if s := d.String("direct", "shim"); tc.same != strings.Contains(s, "parity: the same") {
				t.Errorf("summary:\n%s", s)
			}
		})
	}
}

func TestParseSkipList(t *testing.T) {
	got, err := parseSkipList([]byte("# comment\n\nfoo bar | why not\n  baz\\[x\\] | because  \n"))
	if err != nil {
		t.Fatal(err)
	}
	want := []skipEntry{{"foo bar", "why not"}, {`baz\[x\]`, "because"}}
	if !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
	for _, bad := range []string{"no reason here", "pattern | ", " | reason only"} {
		if _, err := parseSkipList([]byte(bad)); err == nil {
			t.Errorf("%q: accepted", bad)
		}
	}
}

func TestRunOrder(t *testing.T) {
	runs := []string{"containerd-2.1-shim", "containerd-1.6-shim-strict", "containerd-1.6-shim", "containerd-2.1-direct", "containerd-1.6-direct"}
	slices.SortFunc(runs, runOrder)
	want := []string{"containerd-1.6-direct", "containerd-1.6-shim", "containerd-1.6-shim-strict", "containerd-2.1-direct", "containerd-2.1-shim"}
	if !slices.Equal(runs, want) {
		t.Errorf("order %q, want %q", runs, want)
	}
}

func TestFailureReason(t *testing.T) {
	reasons, err := parseSkipList([]byte("Idempotence StopContainer | containerd 1.6 answers NotFound\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := failureReason(reasons, "[k8s.io] Idempotence StopContainer should not return an error if not found"); got != "containerd 1.6 answers NotFound" {
		t.Errorf("reason %q", got)
	}
	if got := failureReason(reasons, "[k8s.io] Image Manager something"); !strings.Contains(got, "no reason recorded") {
		t.Errorf("an unknown failure got the reason %q", got)
	}
}
