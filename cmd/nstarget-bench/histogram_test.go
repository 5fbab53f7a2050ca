package main

import (
	"math"
	"strings"
	"testing"
	"time"
)

// Two scrapes of a kubelet, as its /metrics writes them (the buckets of
// kubelet_runtime_operations_duration_seconds cut short), with other
// metrics around.
const (
	scrape0 = `# HELP kubelet_runtime_operations_duration_seconds [ALPHA] Duration in seconds of runtime operations. Broken down by operation type.
# TYPE kubelet_runtime_operations_duration_seconds histogram
kubelet_runtime_operations_duration_seconds_bucket{operation_type="list_containers",le="0.005"} 90
kubelet_runtime_operations_duration_seconds_bucket{operation_type="list_containers",le="0.0125"} 98
kubelet_runtime_operations_duration_seconds_bucket{operation_type="list_containers",le="0.03125"} 100
kubelet_runtime_operations_duration_seconds_bucket{operation_type="list_containers",le="+Inf"} 100
kubelet_runtime_operations_duration_seconds_sum{operation_type="list_containers"} 0.3
kubelet_runtime_operations_duration_seconds_count{operation_type="list_containers"} 100
# HELP kubelet_running_pods [ALPHA] Number of pods that have a running pod sandbox
# TYPE kubelet_running_pods gauge
kubelet_running_pods 100
`
	scrape1 = `# HELP kubelet_runtime_operations_duration_seconds [ALPHA] Duration in seconds of runtime operations. Broken down by operation type.
# TYPE kubelet_runtime_operations_duration_seconds histogram
kubelet_runtime_operations_duration_seconds_bucket{operation_type="list_containers",le="0.005"} 890
kubelet_runtime_operations_duration_seconds_bucket{operation_type="list_containers",le="0.0125"} 998
kubelet_runtime_operations_duration_seconds_bucket{operation_type="list_containers",le="0.03125"} 1099
kubelet_runtime_operations_duration_seconds_bucket{operation_type="list_containers",le="+Inf"} 1100
kubelet_runtime_operations_duration_seconds_sum{operation_type="list_containers"} 3.3
kubelet_runtime_operations_duration_seconds_count{operation_type="list_containers"} 1100
kubelet_runtime_operations_duration_seconds_bucket{operation_type="version",le="0.005"} 10
kubelet_runtime_operations_duration_seconds_bucket{operation_type="version",le="0.0125"} 10
kubelet_runtime_operations_duration_seconds_bucket{operation_type="version",le="0.03125"} 10
kubelet_runtime_operations_duration_seconds_bucket{operation_type="version",le="+Inf"} 10
kubelet_runtime_operations_duration_seconds_sum{operation_type="version"} 0.01
kubelet_runtime_operations_duration_seconds_count{operation_type="version"} 10
`
)

var testBounds = []float64{0.005, 0.0125, 0.03125, math.Inf(1)}

func TestParseHistograms(t *testing.T) {
	s0, err := parseHistograms(strings.NewReader(scrape0), runtimeOpsMetric, "operation_type")
	if err != nil {
		t.Fatal(err)
	}
	h := s0["list_containers"]
	if len(s0) != 1 || !equalFloats(h.bounds, testBounds) || !equalFloats(h.cum, []float64{90, 98, 100, 100}) || h.sum != 0.3 {
		t.Errorf("scrape0 = %+v", s0)
	}
	if s, err := parseHistograms(strings.NewReader(scrape0), "kubelet_pleg_relist_duration_seconds", ""); err != nil || len(s) != 0 {
		t.Errorf("a metric not there: %v, %v; want none, no error", s, err)
	}
	if _, err := parseHistograms(strings.NewReader(scrape0), "kubelet_running_pods", ""); err == nil || !strings.Contains(err.Error(), "not a histogram") {
		t.Errorf("a gauge read as a histogram: %v", err)
	}
	if _, err := parseHistograms(strings.NewReader("kubelet_x{a=\"b\" 1\n"), runtimeOpsMetric, "operation_type"); err == nil {
		t.Error("malformed text parsed without an error")
	}
}

// The phase's calls are the second scrape less the first, bucket by bucket;
// a series that appears in the phase is all the phase's.
func TestHistogramSub(t *testing.T) {
	s0, _ := parseHistograms(strings.NewReader(scrape0), runtimeOpsMetric, "operation_type")
	s1, _ := parseHistograms(strings.NewReader(scrape1), runtimeOpsMetric, "operation_type")
	d, err := s1["list_containers"].sub(s0["list_containers"])
	if err != nil {
		t.Fatal(err)
	}
	if !equalFloats(d.cum, []float64{800, 900, 999, 1000}) || math.Abs(d.sum-3.0) > 1e-9 || d.count() != 1000 {
		t.Errorf("list_containers difference = %+v", d)
	}
	if d.mean() != 3*time.Millisecond {
		t.Errorf("mean = %v, want 3ms", d.mean())
	}
	v, err := s1["version"].sub(s0["version"])
	if err != nil || v.count() != 10 {
		t.Errorf("a new series: %+v, %v; want its 10 calls", v, err)
	}
	// a restarted process: its counts start again
	if _, err := s0["list_containers"].sub(s1["list_containers"]); err == nil || !strings.Contains(err.Error(), "went back") {
		t.Errorf("counts going back: %v", err)
	}
	other := histogram{bounds: []float64{0.01, math.Inf(1)}, cum: []float64{1, 1}}
	if _, err := s1["list_containers"].sub(other); err == nil {
		t.Error("different bounds subtracted without an error")
	}
	if _, err := other.add(s1["list_containers"]); err == nil {
		t.Error("different bounds added without an error")
	}
	sum, err := s1["list_containers"].add(s1["version"])
	if err != nil || !equalFloats(sum.cum, []float64{900, 1008, 1109, 1110}) || math.Abs(sum.sum-3.31) > 1e-9 {
		t.Errorf("add = %+v, %v", sum, err)
	}
	if z, err := (histogram{}).add(sum); err != nil || z.count() != sum.count() {
		t.Errorf("zero + h = %+v, %v", z, err)
	}
}

// Quantiles as Prometheus's histogram_quantile gives them: linear within
// the bucket, the first from 0, the +Inf bucket its lower bound.
func TestHistogramQuantile(t *testing.T) {
	h := histogram{bounds: testBounds, cum: []float64{800, 900, 999, 1000}}
	for _, tc := range []struct {
		q          float64
		v, lo, hi  float64
		formatted  string
		desc       string
		infiniteHi bool
	}{
		{0.5, 0.005 * 500 / 800, 0, 0.005, "3.13ms (≤ 5ms)", "in the first bucket, from 0", false},
		{0.8, 0.005, 0, 0.005, "5ms (≤ 5ms)", "at a bound", false},
		{0.85, 0.005 + 0.0075*50/100, 0.005, 0.0125, "8.75ms (5ms–12.5ms)", "in the second", false},
		{0.99, 0.0125 + 0.01875*90/99, 0.0125, 0.03125, "29.5ms (12.5ms–31.25ms)", "in the third", false},
		{0.9995, 0.03125, 0.03125, 0, "> 31.25ms", "in +Inf: the highest finite bound", true},
	} {
		v, lo, hi := h.quantile(tc.q)
		if math.Abs(v-tc.v) > 1e-12 || lo != tc.lo || (tc.infiniteHi != math.IsInf(hi, 1)) || (!tc.infiniteHi && hi != tc.hi) {
			t.Errorf("%s: quantile(%g) = %g in (%g, %g], want %g in (%g, %g]", tc.desc, tc.q, v, lo, hi, tc.v, tc.lo, tc.hi)
		}
		if got := h.quantileString(tc.q); got != tc.formatted {
			t.Errorf("%s: quantileString(%g) = %q, want %q", tc.desc, tc.q, got, tc.formatted)
		}
	}
	// empty buckets below: the first bucket that reaches the rank
	gap := histogram{bounds: testBounds, cum: []float64{0, 0, 10, 10}}
	if v, lo, _ := gap.quantile(0.5); lo != 0.0125 || math.Abs(v-(0.0125+0.01875/2)) > 1e-12 {
		t.Errorf("after empty buckets: %g from %g", v, lo)
	}
	if v, _, _ := (histogram{}).quantile(0.5); !math.IsNaN(v) {
		t.Errorf("no observations: %g, want NaN", v)
	}
	if got := (histogram{}).quantileString(0.99); got != "–" {
		t.Errorf("no observations: %q", got)
	}
	if got := (histogram{}).mean(); got != 0 {
		t.Errorf("mean of nothing: %v", got)
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !(math.IsInf(a[i], 1) && math.IsInf(b[i], 1)) {
			return false
		}
	}
	return true
}
