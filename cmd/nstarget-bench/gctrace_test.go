package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Lines as Go 1.26's runtime writes them (runtime/mgc.go), among a shim's
// own log lines.
const gctraceLog = `time="2026-11-28T10:00:00Z" level=info msg="serving" listen=unix:///x/cri.sock
gc 1 @0.013s 2%: 0.010+1.5+0.004 ms clock, 0.021+0.40/0.90/0.10+0.008 ms cpu, 3->4->1 MB, 4 MB goal, 0 MB stacks, 0 MB globals, 2 P
time="2026-11-28T10:00:01Z" level=warn msg="gc 2 is not a trace line"
gc 2 @1.250s 1% (checking for goroutine leaks): 0.020+2.0+0.010 ms clock, 0.040+0.10/1.10/0+0.020 ms cpu, 4->4->2 MB, 5 MB goal, 0 MB stacks, 0 MB globals, 2 P (forced)
`

func TestParseGCTrace(t *testing.T) {
	cycles, err := parseGCTrace(strings.NewReader(gctraceLog))
	if err != nil {
		t.Fatal(err)
	}
	ms := func(f float64) time.Duration { return time.Duration(f * float64(time.Millisecond)) }
	want := []gcCycle{
		{ms(0.010), ms(1.5), ms(0.004), ms(0.021), ms(0.40), ms(0.90), ms(0.10), ms(0.008)},
		{ms(0.020), ms(2.0), ms(0.010), ms(0.040), ms(0.10), ms(1.10), 0, ms(0.020)},
	}
	if len(cycles) != len(want) {
		t.Fatalf("parseGCTrace: %d cycles %+v, want %d", len(cycles), cycles, len(want))
	}
	for i := range want {
		if cycles[i] != want[i] {
			t.Errorf("cycle %d = %+v, want %+v", i, cycles[i], want[i])
		}
	}
	g := sumGC(cycles)
	wantG := gcShare{cycles: 2, pause: ms(0.010 + 0.004 + 0.020 + 0.010), marking: ms(0.010 + 1.5 + 0.004 + 0.020 + 2.0 + 0.010),
		cpu: ms(0.021 + 0.40 + 0.90 + 0.008 + 0.040 + 0.10 + 1.10 + 0.020), assist: ms(0.40 + 0.10)}
	// the float sums may differ from the parsed sums by a nanosecond
	near := func(a, b time.Duration) bool { return a-b < 2 && b-a < 2 }
	if g.cycles != wantG.cycles || !near(g.pause, wantG.pause) || !near(g.marking, wantG.marking) || !near(g.cpu, wantG.cpu) || !near(g.assist, wantG.assist) {
		t.Errorf("sumGC = %+v, want %+v", g, wantG)
	}
	if got, want := g.of(ms(259), time.Second), "2 collections: stopped 44µs in all, under way 0.35% of the time; GC CPU 2.59ms (assists 500µs), 1.0% of the process's CPU"; got != want {
		t.Errorf("of = %q\nwant %q", got, want)
	}
	if got := (gcShare{}).of(0, time.Second); got != "no collection" {
		t.Errorf("no cycles: %q", got)
	}
}

// A span counts the collections logged after its mark, not those before.
func TestGCLogSince(t *testing.T) {
	path := filepath.Join(t.TempDir(), "shim.log")
	lines := strings.SplitAfter(gctraceLog, "\n")
	if err := os.WriteFile(path, []byte(strings.Join(lines[:2], "")), 0o600); err != nil {
		t.Fatal(err)
	}
	l := &gcLog{path: path}
	l.mark()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(strings.Join(lines[2:], ""))
	f.Close()
	cycles, err := l.since()
	if err != nil || len(cycles) != 1 || cycles[0].mark != 2*time.Millisecond {
		t.Errorf("since the mark: %+v, %v; want the second cycle alone", cycles, err)
	}
}

// The wrapper runs the binary with gctrace added to GODEBUG, keeping what
// was there, and passes the arguments through.
func TestGCTraceWrapper(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	bin := filepath.Join(t.TempDir(), "it's env")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho \"$GODEBUG|$1|$2\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	w, remove, err := gctraceWrapper(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer remove()
	for _, tc := range []struct{ env, want string }{
		{"", "gctrace=1|a b|c\n"},
		{"GODEBUG=madvdontneed=1", "madvdontneed=1,gctrace=1|a b|c\n"},
	} {
		cmd := exec.Command(w, "a b", "c")
		cmd.Env = append(os.Environ(), "GODEBUG=")
		if tc.env != "" {
			cmd.Env = append(cmd.Env, tc.env)
		}
		out, err := cmd.Output()
		if err != nil || string(out) != tc.want {
			t.Errorf("wrapper with %q: %q, %v; want %q", tc.env, out, err, tc.want)
		}
	}
	remove()
	if _, err := os.Stat(w); !os.IsNotExist(err) {
		t.Errorf("wrapper still there after remove: %v", err)
	}
}
