package main

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// fields 3 to 17 of a real line: state, ppid, pgrp, session, tty_nr,
	// tpgid, flags, minflt, cminflt, majflt, cmajflt, utime, stime, cutime,
	// cstime
	const tail = " S 1 4242 4242 0 -1 4194560 2981 0 0 0 1234 567 8 9 20 0 12 0 3030 1234567 5000"
	for _, tc := range []struct {
		desc, stat string
		want       int64
		wantErr    string
	}{
		{"plain command", "4242 (cri-nstarget)" + tail, 1234 + 567, ""},
		{"command with spaces and parentheses", "4242 (a) (b c))" + tail, 1234 + 567, ""},
		{"no command", "4242 cri-nstarget S 1", 0, "no ')'"},
		{"cut short", "4242 (x) S 1 4242 4242 0 -1 4194560 2981 0 0 0 1234", 0, "fields after the command"},
		{"not a number", "4242 (x) S 1 4242 4242 0 -1 4194560 2981 0 0 0 12a4 567", 0, "utime"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := parseStatCPU([]byte(tc.stat))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("parseStatCPU: %d, %v; want an error saying %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("parseStatCPU = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

func TestCPUTicksSelf(t *testing.T) {
	before, err := cpuTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	for start := time.Now(); time.Since(start) < 50*time.Millisecond; {
	}
	after, err := cpuTicks(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after < before {
		t.Errorf("CPU ticks went back: %d then %d", before, after)
	}
}

func TestCPUPer1000(t *testing.T) {
	for _, tc := range []struct {
		ticks, calls int64
		want         time.Duration
	}{
		{0, 0, 0},
		{13, 10_000, 13 * time.Millisecond},  // 130 ms over 10,000 calls: 13 µs a call
		{7, 50_000, 1400 * time.Microsecond}, // 70 ms over 50,000
		{1, 3, 3333333333 * time.Nanosecond}, // 10 ms over 3 calls
	} {
		if got := cpuPer1000(tc.ticks, tc.calls); got != tc.want {
			t.Errorf("cpuPer1000(%d, %d) = %v, want %v", tc.ticks, tc.calls, got, tc.want)
		}
	}
}

func TestParseRSS(t *testing.T) {
	status := "Name:\tcri-nstarget\nVmPeak:\t 1300000 kB\nVmRSS:\t   22828 kB\nRssAnon:\t 9000 kB\n"
	if got := parseRSS([]byte(status)); got != 22828 {
		t.Errorf("parseRSS = %d, want 22828", got)
	}
	if got := parseRSS([]byte("Name:\tkthreadd\n")); got != 0 {
		t.Errorf("parseRSS without VmRSS = %d, want 0", got)
	}
}
