package soak

import (
	"fmt"
	"time"
)

// Sample is the shim's resources at one moment.
type Sample struct {
	At         time.Duration // since the warm-up ended
	PID        int
	RSS        int64 // bytes (VmRSS)
	FDs        int
	Goroutines int // go_goroutines, -1 when the metrics did not answer
}

// Growth is the bound on the shim's growth over a run: the last sample may
// exceed the first by Factor times the first plus Slack, for each resource.
// The shim restarts during the run, so what is compared is what a shim of
// this run holds after a warm-up: a leak that survives restarts (pins,
// records, connections) or one that grows faster than the restarts clear it.
type Growth struct {
	Factor                  float64
	RSSSlack                int64
	FDSlack, GoroutineSlack int
}

// DefaultGrowth: half again the first sample, plus 16 MiB of RSS, 32 fds
// and 32 goroutines (a shim of this project serves with about 20 MiB, 15 fds
// and 25 goroutines: docs/reports/reliability.md, Load).
var DefaultGrowth = Growth{Factor: 1.5, RSSSlack: 16 << 20, FDSlack: 32, GoroutineSlack: 32}

// String states the bound, for the report.
func (g Growth) String() string {
	return fmt.Sprintf("last <= %.1f x first + (%d MiB RSS, %d fds, %d goroutines)", g.Factor, g.RSSSlack>>20, g.FDSlack, g.GoroutineSlack)
}

// Check returns what grew beyond the bound between the first and the last
// sample; nil when nothing did or there are fewer than two samples.
func (g Growth) Check(samples []Sample) []string {
	if len(samples) < 2 {
		return nil
	}
	first, last := samples[0], samples[len(samples)-1]
	var over []string
	check := func(what string, a, b, slack int64) {
		if limit := int64(float64(a)*g.Factor) + slack; b > limit {
			over = append(over, fmt.Sprintf("%s grew from %d to %d (bound %d)", what, a, b, limit))
		}
	}
	check("RSS", first.RSS, last.RSS, g.RSSSlack)
	check("fds", int64(first.FDs), int64(last.FDs), int64(g.FDSlack))
	if first.Goroutines >= 0 && last.Goroutines >= 0 {
		check("goroutines", int64(first.Goroutines), int64(last.Goroutines), int64(g.GoroutineSlack))
	}
	return over
}
