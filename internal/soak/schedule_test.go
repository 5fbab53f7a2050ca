package soak

import (
	"slices"
	"testing"
	"time"
)

func TestSchedule(t *testing.T) {
	for _, tc := range []struct {
		desc      string
		d, tail   time.Duration
		wantCount int
	}{
		{"smoke: one of each kind", 4 * time.Minute, 30 * time.Second, len(FaultKinds)},
		{"30 minutes: one a minute", 30 * time.Minute, 30 * time.Second, 29},
		{"shorter than its tail", 20 * time.Second, 30 * time.Second, 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := Schedule(42, tc.d, tc.tail, Plan{})
			if len(got) != tc.wantCount {
				t.Fatalf("%d faults, want %d:\n%s", len(got), tc.wantCount, FormatSchedule(got))
			}
			seen := map[FaultKind]int{}
			for i, f := range got {
				seen[f.Kind]++
				if f.At < 0 || f.At > tc.d-tc.tail {
					t.Errorf("fault %d at %s, outside [0, %s]", i, f.At, tc.d-tc.tail)
				}
				if i > 0 && f.At <= got[i-1].At {
					t.Errorf("fault %d at %s, not after fault %d at %s", i, f.At, i-1, got[i-1].At)
				}
			}
			if len(got) >= len(FaultKinds) {
				for _, k := range FaultKinds {
					if seen[k] == 0 {
						t.Errorf("no %s in\n%s", k, FormatSchedule(got))
					}
				}
			}
			if again := Schedule(42, tc.d, tc.tail, Plan{}); !slices.Equal(got, again) {
				t.Errorf("the same seed gave another schedule:\n%s\n%s", FormatSchedule(got), FormatSchedule(again))
			}
		})
	}
	if a, b := Schedule(1, 30*time.Minute, 0, Plan{}), Schedule(2, 30*time.Minute, 0, Plan{}); slices.Equal(a, b) {
		t.Errorf("seeds 1 and 2 gave the same schedule")
	}
}

func TestSchedulePlan(t *testing.T) {
	got := Schedule(7, 2*time.Minute, 30*time.Second, Plan{Kinds: []FaultKind{NRIDuringRemoval}, Every: 20 * time.Second})
	if len(got) != 4 {
		t.Fatalf("%d faults, want 4 (90 s in slots of 20 s):\n%s", len(got), FormatSchedule(got))
	}
	for _, f := range got {
		if f.Kind != NRIDuringRemoval {
			t.Errorf("fault %s, want only %s", f.Kind, NRIDuringRemoval)
		}
	}
}

func TestParseKinds(t *testing.T) {
	if k, err := ParseKinds(""); err != nil || k != nil {
		t.Errorf(`ParseKinds("") = %v, %v; want all (nil)`, k, err)
	}
	if k, err := ParseKinds("shim-sigkill, containerd-restart"); err != nil || !slices.Equal(k, []FaultKind{ShimKill, ContainerdRestart}) {
		t.Errorf("ParseKinds = %v, %v", k, err)
	}
	if _, err := ParseKinds("shim-sigkill,reboot"); err == nil {
		t.Error("ParseKinds accepted an unknown fault")
	}
}
