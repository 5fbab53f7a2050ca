package soak

import "testing"

func TestGrowthCheck(t *testing.T) {
	s := func(rss int64, fds, g int) Sample { return Sample{RSS: rss << 20, FDs: fds, Goroutines: g} }
	for _, tc := range []struct {
		desc    string
		samples []Sample
		over    int
	}{
		{"one sample", []Sample{s(20, 15, 25)}, 0},
		{"steady", []Sample{s(20, 15, 25), s(30, 20, 30), s(22, 16, 26)}, 0},
		{"at the bound", []Sample{s(20, 16, 20), s(46, 56, 62)}, 0},
		{"RSS beyond", []Sample{s(20, 15, 25), s(47, 15, 25)}, 1},
		{"fds and goroutines beyond", []Sample{s(20, 16, 20), s(20, 57, 63)}, 2},
		{"goroutines unknown", []Sample{s(20, 15, -1), s(20, 15, 1000)}, 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := DefaultGrowth.Check(tc.samples); len(got) != tc.over {
				t.Errorf("Check = %q, want %d over", got, tc.over)
			}
		})
	}
}
