package soak

import (
	"strings"
	"testing"
	"time"
)

func TestReport(t *testing.T) {
	r := &Report{Duration: 3 * time.Minute, Seed: 1, Backend: "containerd-2.4",
		Outcomes: map[Outcome]int{Joined: 5, FellBack: 2, Refused: 1}, Faults: map[FaultKind]int{ShimKill: 1},
		Samples: []Sample{{RSS: 20 << 20, FDs: 15, Goroutines: 25}, {RSS: 21 << 20, FDs: 16, Goroutines: 26}}}
	if f := r.Failures(); len(f) != 0 {
		t.Errorf("Failures of a clean run = %q", f)
	}
	if row := r.Row(); !strings.HasSuffix(row, "| passed |") || !strings.Contains(row, "| 5 / 2 / 1 |") || !strings.Contains(row, "shim-sigkill 1, shim-sigterm 0") {
		t.Errorf("Row = %s", row)
	}
	r.WrongJoins = []string{"p/dbg-1: no record"}
	r.Leaks = []string{"intent record x.json", "pin y"}
	if f := r.Failures(); len(f) != 3 || !strings.HasPrefix(f[0], "wrong join: ") || !strings.HasPrefix(f[2], "leak: ") {
		t.Errorf("Failures = %q", f)
	}
	if row := r.Row(); !strings.HasSuffix(row, "| FAILED (3 findings) |") {
		t.Errorf("Row of a failed run = %s", row)
	}
}
