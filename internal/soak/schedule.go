package soak

import (
	"fmt"
	"math/rand"
	"slices"
	"strings"
	"time"
)

// FaultKind is one kind of fault the soak injects.
type FaultKind string

// The faults, in the order the report lists them.
const (
	// ShimKill: SIGKILL of the shim, started again after systemd's
	// RestartSec (the unit's Restart=always).
	ShimKill FaultKind = "shim-sigkill"
	// ShimTerm: SIGTERM of the shim (it drains), then started again.
	ShimTerm FaultKind = "shim-sigterm"
	// ContainerdRestart: containerd stopped and started again; the shim
	// reconnects (and registers its NRI plugin again) by itself.
	ContainerdRestart FaultKind = "containerd-restart"
	// TargetKilled: a target's process killed at the moment its debug
	// container is being made.
	TargetKilled FaultKind = "target-killed-at-debug"
	// NRIDuringRemoval: pods deleted and, while the kubelet removes their
	// sandboxes, the shim restarted, so that its NRI plugin registers again
	// in the middle of the removals.
	NRIDuringRemoval FaultKind = "nri-register-during-removal"
)

// FaultKinds are all the kinds, each used by every schedule long enough.
var FaultKinds = []FaultKind{ShimKill, ShimTerm, ContainerdRestart, TargetKilled, NRIDuringRemoval}

// Fault is one fault of a schedule: its kind, at At after the warm-up.
type Fault struct {
	At   time.Duration
	Kind FaultKind
}

// Plan is what a schedule is drawn from: the kinds of fault (all of
// FaultKinds when empty) and about how often one comes (a minute when 0).
type Plan struct {
	Kinds []FaultKind
	Every time.Duration
}

// Schedule draws the faults of a run of length d from seed: one per slot
// (d less a quiet tail, split into slots of about plan.Every, at least one
// slot per kind), at a random point of the slot's first half, so that the
// second half leaves time to recover. Kinds come in shuffled rounds of
// every kind, so every kind appears once there are as many slots. The same
// seed, d and plan give the same schedule.
func Schedule(seed int64, d, tail time.Duration, plan Plan) []Fault {
	kindsOf := plan.Kinds
	if len(kindsOf) == 0 {
		kindsOf = FaultKinds
	}
	every := plan.Every
	if every <= 0 {
		every = time.Minute
	}
	span := d - tail
	if span <= 0 {
		return nil
	}
	n := int(span / every)
	if n < len(kindsOf) {
		n = len(kindsOf)
	}
	slot := span / time.Duration(n)
	rng := rand.New(rand.NewSource(seed))
	var kinds []FaultKind
	faults := make([]Fault, 0, n)
	for i := range n {
		if len(kinds) == 0 {
			kinds = append(kinds, kindsOf...)
			rng.Shuffle(len(kinds), func(a, b int) { kinds[a], kinds[b] = kinds[b], kinds[a] })
		}
		at := time.Duration(i)*slot + time.Duration(rng.Int63n(int64(slot/2)+1))
		faults = append(faults, Fault{At: at.Round(time.Second), Kind: kinds[0]})
		kinds = kinds[1:]
	}
	return faults
}

// ParseKinds reads a comma-separated list of fault kinds; "" is all.
func ParseKinds(list string) ([]FaultKind, error) {
	var kinds []FaultKind
	for _, k := range strings.Split(list, ",") {
		if k = strings.TrimSpace(k); k == "" {
			continue
		}
		if !slices.Contains(FaultKinds, FaultKind(k)) {
			return nil, fmt.Errorf("unknown fault %q (one of %v)", k, FaultKinds)
		}
		kinds = append(kinds, FaultKind(k))
	}
	return kinds, nil
}

// FormatSchedule is the schedule as printed at the start of a run.
func FormatSchedule(faults []Fault) string {
	var b strings.Builder
	for i, f := range faults {
		fmt.Fprintf(&b, "  %2d  +%-6s %s\n", i+1, f.At, f.Kind)
	}
	return b.String()
}
