package main

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTick is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// 100 on Linux whatever the kernel's own HZ (proc(5)).
const clockTick = 10 * time.Millisecond

// cpuTicks is the process's CPU time so far, user and system, all its
// threads, in clock ticks.
func cpuTicks(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime + stime (fields 14 and 15) from the text of
// /proc/<pid>/stat. Field 2, the command, is in parentheses and may hold
// spaces and parentheses itself: the fields are counted from the last ')'.
func parseStatCPU(b []byte) (int64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/<pid>/stat: no ')' after the command in %q", b)
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3, the state
	const utime, stime = 14 - 3, 15 - 3
	if len(f) <= stime {
		return 0, fmt.Errorf("/proc/<pid>/stat: %d fields after the command, want at least %d", len(f), stime+1)
	}
	u, err := strconv.ParseInt(f[utime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/<pid>/stat utime: %w", err)
	}
	s, err := strconv.ParseInt(f[stime], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc/<pid>/stat stime: %w", err)
	}
	return u + s, nil
}

// cpuPer1000 is CPU time per 1,000 calls, from clock ticks over calls.
func cpuPer1000(ticks, calls int64) time.Duration {
	if calls <= 0 {
		return 0
	}
	return time.Duration(ticks) * clockTick * 1000 / time.Duration(calls)
}

// rssKiB is the process's resident set (VmRSS), 0 if it cannot be read.
func rssKiB(pid int) int64 {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	return parseRSS(b)
}

func parseRSS(status []byte) int64 { return statusKiB(status, "VmRSS") }

// statusKiB is the value of the line "key: N kB" of /proc/<pid>/status
// (VmRSS, VmHWM, ...), 0 if there is none.
func statusKiB(status []byte, key string) int64 {
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, key+":"); ok {
			if f := strings.Fields(v); len(f) > 0 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n
			}
		}
	}
	return 0
}

// memKiB is the process's VmRSS and VmHWM (its peak resident set since it
// started or since resetPeakRSS), 0 and 0 if they cannot be read.
func memKiB(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	return statusKiB(b, "VmRSS"), statusKiB(b, "VmHWM")
}

// resetPeakRSS sets the process's VmHWM to its current resident set
// (proc(5), /proc/<pid>/clear_refs, 5).
func resetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// cpuSample is the CPU time so far of a set of processes, in clock ticks,
// by pid.
type cpuSample map[int]int64

// sampleCPU reads every pid's CPU time; a pid that is gone is left out.
func sampleCPU(pids ...int) cpuSample {
	s := cpuSample{}
	for _, pid := range pids {
		if pid <= 0 {
			continue
		}
		if t, err := cpuTicks(pid); err == nil {
			s[pid] = t
		}
	}
	return s
}

// since is the CPU time the processes of s spent after before, summed over
// the pids in both: a process that started or ended in between is left
// out, since its time is not all in the span.
func (s cpuSample) since(before cpuSample) time.Duration {
	var ticks int64
	for pid, t := range s {
		if t0, ok := before[pid]; ok && t >= t0 {
			ticks += t - t0
		}
	}
	return time.Duration(ticks) * clockTick
}
