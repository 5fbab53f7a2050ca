package main

import (
	"slices"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := summarize(ds)
	want := stats{n: 100, min: time.Millisecond, med: 51 * time.Millisecond, p99: 100 * time.Millisecond}
	if got != want {
		t.Errorf("summarize(1..100 ms) = %+v, want %+v", got, want)
	}
	if got := summarize(nil); got.n != 0 || got.String() != "–" {
		t.Errorf("summarize(nil) = %+v %q", got, got.String())
	}
	if ds[0] != 100*time.Millisecond {
		t.Error("summarize sorted its input")
	}
}

func TestStatsString(t *testing.T) {
	s := stats{n: 3, min: 56_400 * time.Nanosecond, med: 1_234_567 * time.Nanosecond, p99: 140_612_345 * time.Nanosecond}
	if got, want := s.String(), "56µs / 1.23ms / 140.6ms"; got != want {
		t.Errorf("String = %q, want %q", got, want)
	}
}

func TestShift(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		var out []time.Duration
		for _, x := range xs {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	for _, tc := range []struct {
		desc string
		a, b []time.Duration
		want time.Duration
	}{
		{"empty", nil, ms(1), 0},
		{"constant offset", ms(6, 16, 6), ms(8, 18, 8), 2 * time.Millisecond},
		{"an outlier does not move it", ms(6, 6, 6), ms(7, 7, 900), time.Millisecond},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := shift(tc.a, tc.b); got != tc.want {
				t.Errorf("shift = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestOrder(t *testing.T) {
	var seq []int
	for i := range 18 {
		seq = append(seq, order(3, i))
	}
	want := []int{0, 1, 2, 1, 0, 2, 2, 0, 1, 0, 2, 1, 1, 2, 0, 2, 1, 0}
	if !slices.Equal(seq, want) {
		t.Fatalf("order(3, 0..17) = %v, want %v", seq, want)
	}
	// After every whole cycle each side has had as many blocks as the
	// others; over the six orders, each side follows each other one.
	follows := map[[2]int]int{}
	for i := 1; i < len(seq); i++ {
		follows[[2]int{seq[i-1], seq[i]}]++
	}
	for a := range 3 {
		for b := range 3 {
			if a != b && follows[[2]int{a, b}] == 0 {
				t.Errorf("side %d never follows side %d", b, a)
			}
		}
	}
	if got := []int{order(2, 0), order(2, 1), order(2, 2), order(2, 3)}; !slices.Equal(got, []int{0, 1, 1, 0}) {
		t.Errorf("order(2, 0..3) = %v", got)
	}
	// With four sides, every four cycles have one led by each side, and
	// the 24 cycles take the 24 orders.
	seen := map[[4]int]bool{}
	for cycle := range 24 {
		var o [4]int
		for j := range 4 {
			o[j] = order(4, 4*cycle+j)
		}
		seen[o] = true
		if want := cycle % 4; o[0] != want {
			t.Errorf("cycle %d of four sides: %v, want it led by %d", cycle, o, want)
		}
	}
	if len(seen) != 24 {
		t.Errorf("24 cycles of four sides took %d orders, want 24", len(seen))
	}
}
