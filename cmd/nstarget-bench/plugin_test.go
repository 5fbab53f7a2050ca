package main

import (
	"testing"
	"time"
)

func TestPairwise(t *testing.T) {
	ms := func(vs ...int) []time.Duration {
		var ds []time.Duration
		for _, v := range vs {
			ds = append(ds, time.Duration(v)*time.Millisecond)
		}
		return ds
	}
	for _, tc := range []struct {
		desc     string
		a, b     []time.Duration
		p50, p90 time.Duration
	}{
		{"none", nil, ms(1), 0, 0},
		{"the same", ms(5, 5), ms(5, 5), 0, 0},
		// differences 1, 2, 3, 4 ... 10 (all pairs of 0..0 and 1..10)
		{"b later", ms(0), ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10), 6 * time.Millisecond, 10 * time.Millisecond},
		// b-a over the pairs: -1, 0, 9, 10: the median of the pairs, not of the medians
		{"bimodal", ms(6, 16), ms(15, 16), 9 * time.Millisecond, 10 * time.Millisecond},
	} {
		p50, p90 := pairwise(tc.a, tc.b)
		if p50 != tc.p50 || p90 != tc.p90 {
			t.Errorf("%s: pairwise = %v, %v; want %v, %v", tc.desc, p50, p90, tc.p50, tc.p90)
		}
		if len(tc.a) > 0 && shift(tc.a, tc.b) != p50 {
			t.Errorf("%s: median %v, shift %v", tc.desc, p50, shift(tc.a, tc.b))
		}
	}
}
