package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSlicePlan(t *testing.T) {
	m := time.Minute
	for _, tc := range []struct {
		slices int
		want   []nodeSlice
	}{
		{1, []nodeSlice{{viaShim, 10 * m}, {viaDirect, 10 * m}}},
		{2, []nodeSlice{{viaShim, 5 * m}, {viaDirect, 10 * m}, {viaShim, 5 * m}}},
		{3, []nodeSlice{{viaShim, 200 * time.Second}, {viaDirect, 400 * time.Second}, {viaShim, 400 * time.Second}, {viaDirect, 200 * time.Second}}},
		{4, []nodeSlice{{viaShim, 150 * time.Second}, {viaDirect, 300 * time.Second}, {viaShim, 300 * time.Second}, {viaDirect, 300 * time.Second}, {viaShim, 150 * time.Second}}},
	} {
		got := slicePlan(tc.slices, 10*m)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("slicePlan(%d, 10m) = %v, want %v", tc.slices, got, tc.want)
		}
		var per [nNodeSides]time.Duration
		for _, s := range got {
			per[s.side] += s.d
		}
		if per[viaShim] != 10*m || per[viaDirect] != 10*m {
			t.Errorf("slicePlan(%d, 10m): %v a side, want 10m each", tc.slices, per)
		}
	}
}

// A process that ends, or one that starts, within the span is left out.
func TestCPUSampleSince(t *testing.T) {
	before := cpuSample{10: 100, 11: 50, 12: 7}
	after := cpuSample{10: 130, 11: 52, 13: 999}
	if got, want := after.since(before), 32*clockTick; got != want {
		t.Errorf("since = %v, want %v", got, want)
	}
	if got := (cpuSample{10: 90}).since(before); got != 0 {
		t.Errorf("a reused pid, fewer ticks than before: %v, want 0", got)
	}
}

func TestStatusKiB(t *testing.T) {
	status := []byte("Name:\tcri-nstarget\nVmPeak:\t 1300000 kB\nVmHWM:\t   25100 kB\nVmRSS:\t   22828 kB\n")
	for key, want := range map[string]int64{"VmRSS": 22828, "VmHWM": 25100, "VmPeak": 1300000, "VmSwap": 0} {
		if got := statusKiB(status, key); got != want {
			t.Errorf("statusKiB(%s) = %d, want %d", key, got, want)
		}
	}
}

func TestPodsManifest(t *testing.T) {
	var list struct {
		Kind  string
		Items []struct {
			Metadata struct{ Name string }
			Spec     struct {
				NodeName                     string
				AutomountServiceAccountToken bool
				Containers                   []struct {
					Image   string
					Command []string
				}
			}
		}
	}
	if err := json.Unmarshal([]byte(podsManifest(3, "127.0.0.1:5000/nst/busybox:1")), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "List" || len(list.Items) != 3 || list.Items[2].Metadata.Name != "busy-002" {
		t.Fatalf("manifest: %+v", list)
	}
	s := list.Items[0].Spec
	if s.NodeName != "localhost" || s.AutomountServiceAccountToken || len(s.Containers) != 1 ||
		s.Containers[0].Image != "127.0.0.1:5000/nst/busybox:1" || strings.Join(s.Containers[0].Command, " ") != "sleep 2147483647" {
		t.Errorf("pod spec: %+v", s)
	}
}

func TestPerfTop(t *testing.T) {
	report := `# To display the perf.data header info, please use --header/--header-only options.
#
# Samples: 1K of event 'cpu-clock:pppH'
# Event count (approx.): 1234
#
# Overhead  Symbol
# ........  ......
#
    20.00%  [k] _raw_spin_unlock_irqrestore
    10.00%  [.] runtime.futex                     -      -
     5.00%  [.] runtime.mallocgc

`
	want := "# Samples: 1K of event 'cpu-clock:pppH'\n20.00%  [k] _raw_spin_unlock_irqrestore\n10.00%  [.] runtime.futex\n"
	if got := perfTop(report, 2); got != want {
		t.Errorf("perfTop =\n%s\nwant\n%s", got, want)
	}
}

// The report adds up each side's slices and judges the three goals.
func TestNodeReport(t *testing.T) {
	h := func(cum ...float64) histogram { return histogram{bounds: testBounds, cum: cum, sum: cum[3] * 0.002} }
	slice := func(side int, shim, ctrd time.Duration, ops histogram) sliceResult {
		return sliceResult{nodeSlice: nodeSlice{side, time.Minute}, span: time.Minute,
			cpu: [nProcs]time.Duration{procShim: shim, procContainerd: ctrd, procKubelet: time.Second},
			ops: scrape{"list_containers": ops}, relist: h(60, 60, 60, 60), ready: 2}
	}
	r := nodeReport{command: "nstarget-bench node -duration 2m", m: machine{cpus: 2}, versions: "containerd v2.4.2", o: nodeOptions{warmup: time.Second},
		when: time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC), took: 5 * time.Minute, hwm: 30 << 10, rss: 20 << 10, hwmSetup: 40 << 10,
		slices: []sliceResult{
			slice(viaShim, 1*time.Second, 20*time.Second, h(900, 990, 1000, 1000)),
			slice(viaDirect, 0, 20*time.Second, h(1800, 1980, 2000, 2000)),
			slice(viaShim, 2*time.Second, 20*time.Second, h(900, 990, 1000, 1000)),
		}}
	s, err := r.String()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Command: `nstarget-bench node -duration 2m` (2026-11-28 12:00 UTC, 5m0s)\n",
		"- slices (A: the kubelet on the shim, B: on containerd directly): A 1m0s, B 1m0s, A 1m0s;",
		// 3 s against 40 s
		"| the shim's CPU time against containerd's (the daemon alone), the kubelet on the shim | ≤ 10% | 7.5% (shim 3s, containerd 40s over 2m0s) | met |\n",
		"| the shim's peak RSS (VmHWM) over the measure | ≤ 32 MiB | 30.0 MiB (VmRSS at the end 20.0 MiB; VmHWM with the pods' creation 40.0 MiB) | met |\n",
		// both sides the same distribution: p99 in the second bucket, 1.00
		"| the kubelet's p99 CRI latency, every operation, through the shim / direct | ≤ 1.1× | 1.00 (12.5ms (5ms–12.5ms) / 12.5ms (5ms–12.5ms); means 2ms / 2ms) | met |\n",
		"| list_containers | 16.67 / 33.33 |",
		"| cri-nstarget | 3s (2.50%) | 0s (0.00%) |\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("report has no %q:\n%s", want, s)
		}
	}
	// the goals missed
	r.hwm = 40 << 10
	r.slices[0].cpu[procShim] = 10 * time.Second
	r.slices[2].ops["list_containers"] = h(500, 900, 1000, 1000)
	s, _ = r.String()
	for _, want := range []string{"| 30.0% (shim 12s, containerd 40s over 2m0s) | missed |", "| 40.0 MiB (VmRSS", "| missed |\n| the kubelet's p99"} {
		if !strings.Contains(s, want) {
			t.Errorf("report has no %q:\n%s", want, s)
		}
	}
	// p99 A: 12.5 + 18.75 * (1980 - 1890) / 110 ms; B: 12.5 ms
	if want := "through the shim / direct | ≤ 1.1× | 2.23 (27.8ms (12.5ms–31.25ms) / 12.5ms (5ms–12.5ms); means 2ms / 2ms) | missed |\n"; !strings.Contains(s, want) {
		t.Errorf("report has no %q:\n%s", want, s)
	}
}
