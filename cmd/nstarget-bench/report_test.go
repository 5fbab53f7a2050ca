package main

import (
	"strings"
	"testing"
	"time"
)

func TestVsFloor(t *testing.T) {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	for _, tc := range []struct {
		desc         string
		shim, splice time.Duration
		k            float64
		want         outcome
	}{
		{"within", us(85), us(52), 2, outcome{"+85µs (splice +52µs: 1.63×)", met}},
		{"at the bound", us(104), us(52), 2, outcome{"+104µs (splice +52µs: 2.00×)", met}},
		{"beyond", us(491), us(100), 4, outcome{"+491µs (splice +100µs: 4.91×)", missed}},
		{"the splice added nothing", us(30), us(-5), 4, outcome{"+30µs (splice -5µs, no bound from it)", noBound}},
		{"neither added anything", us(-2), 0, 2, outcome{"-2µs (splice +0s)", met}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := vsFloor(tc.shim, tc.splice, tc.k); got != tc.want {
				t.Errorf("vsFloor(%v, %v, %v) = %+v, want %+v", tc.shim, tc.splice, tc.k, got, tc.want)
			}
		})
	}
}

func TestRatios(t *testing.T) {
	for _, tc := range []struct {
		desc string
		got  outcome
		want outcome
	}{
		{"lifecycle met", atMost("%.3f", 1.0149, 1.02), outcome{"1.015", met}},
		{"lifecycle missed", atMost("%.3f", 1.043, 1.02), outcome{"1.043", missed}},
		{"throughput met at the bound", atLeast("%.2f", 0.90, 0.90), outcome{"0.90", met}},
		{"throughput missed", atLeast("%.3f", 0.8312, 0.90), outcome{"0.831", missed}},
	} {
		if tc.got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.desc, tc.got, tc.want)
		}
	}
}

func TestSummaryTable(t *testing.T) {
	got := map[string]outcome{
		figLifecycle: {"1.013", met},
		figCPU:       {"13 ms (splice 4 ms)", reported},
	}
	table := summaryTable(got, nil)
	lines := strings.Split(strings.TrimSpace(table), "\n")
	if len(lines) != 2+len(headline) {
		t.Fatalf("table:\n%s\nwant a header and %d rows", table, len(headline))
	}
	if lines[0] != "| figure | target | measured | met/missed |" || lines[1] != "|---|---|---|---|" {
		t.Errorf("header:\n%s\n%s", lines[0], lines[1])
	}
	for _, want := range []string{
		"| pod lifecycle (7 calls), shim/direct p50 | ≤ 1.02 | 1.013 | met |",
		"| shim CPU time per 1,000 relayed calls, under that load | reported | 13 ms (splice 4 ms) | reported |",
		"| 64-client throughput, shim/direct | ≥ 0.90 | not measured in this run | – |",
	} {
		if !strings.Contains(table, want+"\n") {
			t.Errorf("table has no row\n%s\n%s", want, table)
		}
	}
	// every row has four cells
	for _, l := range lines {
		if n := strings.Count(l, "|"); n != 5 {
			t.Errorf("row with %d bars: %s", n, l)
		}
	}
}

func TestDetailTable(t *testing.T) {
	ms := time.Millisecond
	rows := []result{
		{measure: "Version", sides: [nSides]stats{{n: 2, min: ms, med: 2 * ms, p99: 3 * ms}, {n: 2, min: ms, med: 2 * ms, p99: 4 * ms}, {}, {n: 2, min: ms, med: 3 * ms, p99: 5 * ms}},
			figure: "added p50 +0s"},
	}
	for _, tc := range []struct {
		sides int
		want  string
	}{
		{nSides - 1, "| measure | direct min / p50 / p99 | shim min / p50 / p99 | splice min / p50 / p99 | figure |\n" +
			"|---|---|---|---|---|\n" +
			"| Version | 1ms / 2ms / 3ms | 1ms / 2ms / 4ms | – | added p50 +0s |\n"},
		{nSides, "| measure | direct min / p50 / p99 | shim min / p50 / p99 | splice min / p50 / p99 | baseline min / p50 / p99 | figure |\n" +
			"|---|---|---|---|---|---|\n" +
			"| Version | 1ms / 2ms / 3ms | 1ms / 2ms / 4ms | – | 1ms / 3ms / 5ms | added p50 +0s |\n"},
	} {
		if table := detailTable(rows, tc.sides); table != tc.want {
			t.Errorf("detailTable(%d sides):\n%s\nwant\n%s", tc.sides, table, tc.want)
		}
	}
}

func TestAdded(t *testing.T) {
	us := func(n int) time.Duration { return time.Duration(n) * time.Microsecond }
	var st [nSides]stats
	st[sideDirect] = stats{n: 1, med: us(100), p99: us(200)}
	st[sideShim] = stats{n: 1, med: us(230), p99: us(600)}
	st[sideSplice] = stats{n: 1, med: us(140), p99: us(190)}
	if got, want := added(st), "added p50 shim +130µs, splice +40µs; p99 shim +400µs, splice -10µs"; got != want {
		t.Errorf("added without a baseline = %q, want %q", got, want)
	}
	st[sideBaseline] = stats{n: 1, med: us(250), p99: us(700)}
	if got, want := added(st), "added p50 shim +130µs, baseline +150µs, splice +40µs; p99 shim +400µs, baseline +500µs, splice -10µs"; got != want {
		t.Errorf("added with a baseline = %q, want %q", got, want)
	}
}

func TestCommandLine(t *testing.T) {
	got := commandLine([]string{"-shim-binary", "bin/cri-nstarget", "-only", "unary,throughput", "-image", "a b", "-x", "it's", "-e", ""})
	want := `nstarget-bench -shim-binary bin/cri-nstarget -only unary,throughput -image 'a b' -x 'it'\''s' -e ''`
	if got != want {
		t.Errorf("commandLine = %s\nwant          %s", got, want)
	}
}

// TestSummary is a run with a baseline: its figures stand beside the shim's.
func TestSummary(t *testing.T) {
	m := machine{cpus: 2, cpuModel: "AMD EPYC", memory: "24 GiB", kernel: "6.1.0-40-amd64", os: "Debian GNU/Linux 12 (bookworm)",
		containerd: "containerd 1.6.20~ds1 (private)", shim: "cri-nstarget dev, sha256 0123456789ab", baseline: "cri-nstarget old, sha256 ba5e",
		splice: "io.Copy, a process of its own"}
	got := map[string]outcome{figLifecycle: {"1.013", met}, figTargetUpdate: {"+3ms", reported}}
	base := map[string]outcome{figLifecycle: {"1.031", missed}}
	s := summary("nstarget-bench -count 2", m, time.Date(2026, 11, 23, 7, 40, 0, 0, time.UTC), 83*time.Second, got, base)
	for _, want := range []string{
		"Command: `nstarget-bench -count 2` (2026-11-23 07:40 UTC, 1m23s)\n",
		"- machine: 2 CPUs (nproc), AMD EPYC, 24 GiB, Debian GNU/Linux 12 (bookworm), kernel 6.1.0-40-amd64\n",
		"- containerd: containerd 1.6.20~ds1 (private)\n",
		"- baseline (old): cri-nstarget old, sha256 ba5e\n",
		"| figure | target | measured | baseline (old) | met/missed |\n|---|---|---|---|---|\n",
		"| pod lifecycle (7 calls), shim/direct p50 | ≤ 1.02 | 1.013 | 1.031 | met |\n",
		"| the same, a shim forced onto the Update path | reported | +3ms | – | reported |\n",
		"| 64-client throughput, shim/direct | ≥ 0.90 | not measured in this run | – | – |\n",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("summary has no %q:\n%s", want, s)
		}
	}
}

func TestMachineString(t *testing.T) {
	for _, tc := range []struct {
		m    machine
		want string
	}{
		{machine{cpus: 2, kernel: "6.1.0", containerd: "c", shim: "s", splice: "f"},
			"- machine: 2 CPUs (nproc), kernel 6.1.0\n- containerd: c\n- shim: s\n- splice (the floor): f\n"},
		{machine{cpus: 2, containerd: "c", shim: "s", baseline: "o", stateDir: "tmpfs", splice: "f"},
			"- machine: 2 CPUs (nproc)\n- containerd: c\n- shim: s; state dir on tmpfs\n- baseline (old): o; state dir on tmpfs\n- splice (the floor): f\n"},
	} {
		if got := tc.m.String(); got != tc.want {
			t.Errorf("machine.String() =\n%s\nwant\n%s", got, tc.want)
		}
	}
}
