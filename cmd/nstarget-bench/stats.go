package main

import (
	"sort"
	"time"
)

// stats summarizes one side's samples of a measure.
type stats struct {
	n             int
	min, med, p99 time.Duration
}

func summarize(ds []time.Duration) stats {
	if len(ds) == 0 {
		return stats{}
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	p99 := s[min(len(s)-1, (len(s)*99)/100)]
	return stats{n: len(s), min: s[0], med: s[len(s)/2], p99: p99}
}

func (s stats) String() string {
	if s.n == 0 {
		return "–"
	}
	return round(s.min).String() + " / " + round(s.med).String() + " / " + round(s.p99).String()
}

// round keeps three significant digits or so: µs under 10 ms, 10 µs up to
// 10 ms, 100 µs above.
func round(d time.Duration) time.Duration {
	a := d
	if a < 0 {
		a = -a
	}
	switch {
	case a >= 10*time.Millisecond:
		return d.Round(100 * time.Microsecond)
	case a >= time.Millisecond:
		return d.Round(10 * time.Microsecond)
	}
	return d.Round(time.Microsecond)
}

// shift is the median of the differences b[j] - a[i] over all pairs: how
// much later b runs than a, robust to outliers and to mixed modes.
func shift(a, b []time.Duration) time.Duration {
	diffs := make([]time.Duration, 0, len(a)*len(b))
	for _, x := range a {
		for _, y := range b {
			diffs = append(diffs, y-x)
		}
	}
	if len(diffs) == 0 {
		return 0
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i] < diffs[j] })
	return diffs[len(diffs)/2]
}

// order is the side (0 to n-1) that block i of a measure over n sides goes
// to. Blocks run in cycles of n, one block a side, and the cycles take each
// order of the sides in turn, every n cycles one led by each side (for
// three: 012, 102, 201, 021, 120, 210), so that every side gets as many
// blocks as the others after each cycle, none always comes first in a short
// measure (four sides have 24 orders), and no side always follows the same
// one.
func order(n, i int) int {
	perms := permutations(n) // lexicographic: the (n-1)! led by 0, then by 1, ...
	cycle, led := i/n, len(perms)/n
	return perms[(cycle%n)*led+(cycle/n)%led][i%n]
}

// permutations of 0..n-1 in lexicographic order.
func permutations(n int) [][]int {
	var out [][]int
	var walk func(prefix, left []int)
	walk = func(prefix, left []int) {
		if len(left) == 0 {
			out = append(out, append([]int(nil), prefix...))
			return
		}
		for i, v := range left {
			rest := append(append([]int(nil), left[:i]...), left[i+1:]...)
			walk(append(prefix, v), rest)
		}
	}
	all := make([]int, n)
	for i := range all {
		all[i] = i
	}
	walk(nil, all)
	return out
}
