package main

import (
	"strings"
	"testing"
)

func TestQuantile(t *testing.T) {
	for _, tc := range []struct {
		desc string
		xs   []int64
		q    float64
		want int64
	}{
		{"empty", nil, 0.5, 0},
		{"one", []int64{7}, 0.9, 7},
		{"median of four is the second", []int64{1, 2, 3, 4}, 0.5, 2},
		{"median of five", []int64{1, 2, 3, 4, 5}, 0.5, 3},
		{"p90 of ten is the ninth", []int64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, 0.9, 9},
		{"p100", []int64{1, 2, 3}, 1, 3},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := quantile(tc.xs, tc.q); got != tc.want {
				t.Errorf("quantile(%v, %v) = %d, want %d", tc.xs, tc.q, got, tc.want)
			}
		})
	}
}

// testdata/critest is one critest -benchmark output directory, trimmed: a
// pod data file (with a datapoint of the wrong length, which is dropped),
// an image listing file, and a ginkgo JSON report with the from-scratch
// measurement, a failed benchmark spec and a validation spec (ignored).
func TestBenchSideAdd(t *testing.T) {
	s := newBenchSide()
	for range 2 {
		if err := s.add("testdata/critest"); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		key  string
		want []int64
	}{
		{"PodSandbox lifecycle\x00CreatePod", []int64{129768696, 99000000, 129768696, 99000000}},
		{"PodSandbox lifecycle\x00all 4 calls", []int64{252347698, 207400000, 252347698, 207400000}},
		{"Image listing\x00ListImages", []int64{330000, 330000}},
		{fromScratch + "\x00create PodSandbox and container", []int64{318853298, 318853298}},
	} {
		got := s.Samples[tc.key]
		if len(got) != len(tc.want) {
			t.Errorf("%q: %v, want %v", tc.key, got, tc.want)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%q: %v, want %v", tc.key, got, tc.want)
				break
			}
		}
	}
	if _, ok := s.Samples["Image listing\x00all 1 calls"]; ok {
		t.Error("a total row for a one-call benchmark")
	}
	if got, want := len(s.Specs), 2; got != want {
		t.Errorf("specs %v: want only the %d benchmark specs", s.Specs, want)
	}
	if got := states(s.Specs["benchmark about listing Image"]); got != "failed 2" {
		t.Errorf("listing Image: %q, want \"failed 2\"", got)
	}
	if len(s.Seconds) != 2 {
		t.Errorf("run times %v, want two", s.Seconds)
	}
}

func TestBenchTable(t *testing.T) {
	direct, shim := newBenchSide(), newBenchSide()
	for _, ns := range []int64{1e6, 2e6, 3e6} {
		direct.record(fromScratch, "create PodSandbox and container", 100*ns)
		direct.record("PodSandbox lifecycle", "CreatePod", ns)
		shim.record("PodSandbox lifecycle", "CreatePod", 2*ns)
	}
	shim.record("Image listing", "ListImages", 5e5)
	table := benchTable(direct, shim)
	lines := strings.Split(strings.TrimSpace(table), "\n")
	want := []string{
		"| PodSandbox lifecycle | CreatePod | 3/3 | 2.00 ms | 4.00 ms | 2.00 | 3.00 ms | 6.00 ms | 2.00 |",
		"| Image listing | ListImages | 0/1 | – | 0.50 ms | – | – | 0.50 ms | – |",
		"| " + fromScratch + " | create PodSandbox and container | 3/0 | 200 ms | – | – | 300 ms | – | – |",
	}
	if len(lines) != 2+len(want) {
		t.Fatalf("table:\n%s\nwant %d rows", table, len(want))
	}
	for i, w := range want {
		if lines[2+i] != w {
			t.Errorf("row %d:\n got %s\nwant %s", i, lines[2+i], w)
		}
	}
}

func TestStates(t *testing.T) {
	if got, want := states([]string{"skipped", "passed", "timedout", "passed", "failed"}), "passed 2, failed 1, skipped 1, timedout 1"; got != want {
		t.Errorf("states = %q, want %q", got, want)
	}
}
