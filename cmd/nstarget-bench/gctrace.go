package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// The shims a benchmark starts run with GODEBUG=gctrace=1: the Go runtime
// writes one line per garbage collection to their log, with the cycle's
// wall-clock phases and its CPU time by kind. What the collector cost over
// a measure is read from the lines written during it, without a metrics
// endpoint or a profiler in the measured process.

// gcCycle is one collection, as a gctrace line gives it.
type gcCycle struct {
	// wall clock: sweep termination (stop the world), concurrent mark and
	// scan, mark termination (stop the world)
	sweepTerm, mark, markTerm time.Duration
	// CPU time: the two stop-the-world phases on all Ps, and the marking
	// done by allocating goroutines (assists), by the dedicated and
	// fractional workers (background), and by idle Ps (idle)
	cpuSweepTerm, assist, background, idle, cpuMarkTerm time.Duration
}

// gctraceRE matches "gc 12 @3.456s 1%: 0.011+1.2+0.004 ms clock,
// 0.023+0.31/0.85/0.12+0.009 ms cpu, ..." (runtime/mgc.go, gcMarkTermination).
var gctraceRE = regexp.MustCompile(`^gc \d+ @[0-9.]+s \d+%[^:]*: ([0-9.]+)\+([0-9.]+)\+([0-9.]+) ms clock, ([0-9.]+)\+([0-9.]+)/([0-9.]+)/([0-9.]+)\+([0-9.]+) ms cpu`)

// parseGCTrace reads the gctrace lines of r, skipping every other line
// (the shim's own log shares the stream).
func parseGCTrace(r io.Reader) ([]gcCycle, error) {
	var cycles []gcCycle
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		m := gctraceRE.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		var d [8]time.Duration
		for i := range d {
			ms, err := strconv.ParseFloat(m[i+1], 64)
			if err != nil {
				return nil, fmt.Errorf("gctrace %q: %w", sc.Text(), err)
			}
			d[i] = time.Duration(ms * float64(time.Millisecond))
		}
		cycles = append(cycles, gcCycle{d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]})
	}
	return cycles, sc.Err()
}

// gcShare is what the collections of a measure cost, summed.
type gcShare struct {
	cycles int
	// pause is the time the world was stopped; marking the wall-clock
	// time a cycle was under way (the pauses and the concurrent mark)
	pause, marking time.Duration
	// cpu is the collector's CPU time, idle marking left out (it runs
	// only on Ps that had nothing else to do); assist is the part paid by
	// goroutines that allocated, the calls' own goroutines among them
	cpu, assist time.Duration
}

func sumGC(cycles []gcCycle) gcShare {
	g := gcShare{cycles: len(cycles)}
	for _, c := range cycles {
		g.pause += c.sweepTerm + c.markTerm
		g.marking += c.sweepTerm + c.mark + c.markTerm
		g.cpu += c.cpuSweepTerm + c.assist + c.background + c.cpuMarkTerm
		g.assist += c.assist
	}
	return g
}

// of says the share against the process's CPU time over the same span
// (procCPU, 0 when not known) and the span's length.
func (g gcShare) of(procCPU, span time.Duration) string {
	if g.cycles == 0 {
		return "no collection"
	}
	s := fmt.Sprintf("%d collections: stopped %v in all, under way %.2f%% of the time; GC CPU %v (assists %v)",
		g.cycles, round(g.pause), 100*float64(g.marking)/float64(span), round(g.cpu), round(g.assist))
	if procCPU > 0 {
		s += fmt.Sprintf(", %.1f%% of the process's CPU", 100*float64(g.cpu)/float64(procCPU))
	}
	return s
}

// gcLog follows the gctrace lines a process writes to its log file.
type gcLog struct {
	path string
	off  int64 // where the span being measured starts
}

// mark starts a span at the log's current end.
func (l *gcLog) mark() {
	if fi, err := os.Stat(l.path); err == nil {
		l.off = fi.Size()
	}
}

// since is the collections logged after the mark.
func (l *gcLog) since() ([]gcCycle, error) {
	f, err := os.Open(l.path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(l.off, io.SeekStart); err != nil {
		return nil, err
	}
	return parseGCTrace(f)
}

// gctraceWrapper writes a script that runs bin with GODEBUG=gctrace=1
// added to the environment (exec: same pid), for harness.StartShim to
// start in bin's place; remove deletes it.
func gctraceWrapper(bin string) (path string, remove func(), err error) {
	f, err := os.CreateTemp("", "nsb-gctrace-*.sh")
	if err != nil {
		return "", nil, err
	}
	script := "#!/bin/sh\nGODEBUG=\"${GODEBUG:+$GODEBUG,}gctrace=1\" exec " + shellQuote(bin) + " \"$@\"\n"
	_, err = f.WriteString(script)
	if err == nil {
		err = f.Chmod(0o755)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", nil, err
	}
	return f.Name(), func() { os.Remove(f.Name()) }, nil
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }
