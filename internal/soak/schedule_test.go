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
			got := Schedule(42, tc.d, tc.tail)
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
			if again := Schedule(42, tc.d, tc.tail); !slices.Equal(got, again) {
				t.Errorf("the same seed gave another schedule:\n%s\n%s", FormatSchedule(got), FormatSchedule(again))
			}
		})
	}
	if a, b := Schedule(1, 30*time.Minute, 0), Schedule(2, 30*time.Minute, 0); slices.Equal(a, b) {
		t.Errorf("seeds 1 and 2 gave the same schedule")
	}
}
