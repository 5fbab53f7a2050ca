package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const junitAllPass = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="2" failures="0">
  <testsuite name="CRI validation" tests="2" time="3">
    <testcase name="[It] [k8s.io] A passes" status="passed" time="1"></testcase>
    <testcase name="[It] [k8s.io] B passes" status="passed" time="1"></testcase>
  </testsuite>
</testsuites>`

const junitNoSpecs = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="0" failures="0">
  <testsuite name="CRI validation" tests="0" time="0"></testsuite>
</testsuites>`

// TestRunCritestReadsItsExit runs stand-ins for critest that write a report
// (or none) and end in different ways: only an exit that agrees with the
// report counts as a result.
func TestRunCritestReadsItsExit(t *testing.T) {
	tests := []struct {
		desc    string
		report  string // what the stand-in writes; "" none
		ending  string // the stand-in's last shell command
		wantErr string // "" for a result
	}{
		{"all passed, exit 0", junitAllPass, "exit 0", ""},
		{"some failed, exit 1", junitSample, "exit 1", ""},
		{"exit 1, no failure in the report", junitAllPass, "exit 1", "no failed spec"},
		{"exit 0, failures in the report", junitSample, "exit 0", "exited 0 but"},
		{"panicked (go test exits 2)", junitAllPass, "exit 2", "did not finish"},
		{"killed", junitAllPass, "kill -9 $$", "did not finish"},
		{"no report", "", "exit 0", "no readable report"},
		{"ran no spec", junitNoSpecs, "exit 0", "ran no spec"},
		{"no JSON report, so attempts unknown", junitAllPass, "exit 0 # no json", "JSON report"},
	}
	for _, tc := range tests {
		t.Run(tc.desc, func(t *testing.T) {
			dir := t.TempDir()
			bin := standInCritest(t, dir, tc.report, tc.ending)
			r, err := runCritest(context.Background(), bin, "unix:///nowhere.sock", filepath.Join(dir, "junit.xml"), filepath.Join(dir, "critest.log"), nil)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Fatalf("runCritest: %v, want a result", err)
			case tc.wantErr == "" && len(r.Passed) == 0:
				t.Errorf("result %+v: no passed spec read", r)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("runCritest: %v, want an error saying %q", err, tc.wantErr)
			}
		})
	}

	t.Run("a report left by an earlier run", func(t *testing.T) {
		dir := t.TempDir()
		junit := filepath.Join(dir, "junit.xml")
		if err := os.WriteFile(junit, []byte(junitAllPass), 0o644); err != nil {
			t.Fatal(err)
		}
		bin := standInCritest(t, dir, "", "exit 0")
		if _, err := runCritest(context.Background(), bin, "unix:///nowhere.sock", junit, filepath.Join(dir, "critest.log"), nil); err == nil {
			t.Error("runCritest took the earlier run's report for this one's")
		}
	})

	t.Run("cannot start", func(t *testing.T) {
		dir := t.TempDir()
		if _, err := runCritest(context.Background(), filepath.Join(dir, "missing"), "unix:///nowhere.sock", filepath.Join(dir, "junit.xml"), filepath.Join(dir, "critest.log"), nil); err == nil || !strings.Contains(err.Error(), "did not run") {
			t.Errorf("runCritest of a missing binary: %v, want \"did not run\"", err)
		}
	})
}

// standInCritest writes a shell script that writes report (if any) where
// -ginkgo.junit-report says, then runs ending.
func standInCritest(t *testing.T, dir, report, ending string) string {
	t.Helper()
	script := "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = -ginkgo.junit-report ] && out=$2; [ \"$1\" = -ginkgo.json-report ] && json=$2; shift; done\n"
	if report != "" {
		src := filepath.Join(dir, "report.xml")
		if err := os.WriteFile(src, []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
		script += "cp " + src + " \"$out\"\n"
		if !strings.Contains(ending, "no json") {
			script += "echo '[{\"SpecReports\": []}]' > \"$json\"\n"
		}
	}
	bin := filepath.Join(dir, "critest")
	if err := os.WriteFile(bin, []byte(script+ending+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestReadRetried reads a JSON report that ginkgo v2.32.1 (critest's)
// wrote with -ginkgo.flake-attempts=2 for four specs: one passed on its
// second attempt, one at once, one failed both, one skipped.
func TestReadRetried(t *testing.T) {
	got, err := readRetried("testdata/ginkgo-flake-attempts.json")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"[k8s.io] Container passes on the second attempt"}; !slices.Equal(got, want) {
		t.Errorf("readRetried = %q, want %q", got, want)
	}
	if _, err := readRetried(filepath.Join(t.TempDir(), "missing.json")); err == nil {
		t.Error("readRetried of a missing report: no error")
	}
}

// TestRunCritestRetries: every run asks ginkgo to run a failing spec once
// more, and writes its JSON report beside the JUnit one.
func TestRunCritestRetries(t *testing.T) {
	dir := t.TempDir()
	args := filepath.Join(dir, "args")
	bin := standInCritest(t, dir, junitAllPass, "exit 0")
	// record the arguments before the stand-in shifts them away
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte(strings.Replace(string(b), "while", "echo \"$*\" > '"+args+"'\nwhile", 1)), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := runCritest(context.Background(), bin, "unix:///nowhere.sock", filepath.Join(dir, "junit.xml"), filepath.Join(dir, "critest.log"), nil); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(args)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"-ginkgo.flake-attempts 2", "-ginkgo.json-report " + filepath.Join(dir, "junit.json")} {
		if !strings.Contains(string(got), want) {
			t.Errorf("critest's arguments %q lack %q", got, want)
		}
	}
}

// TestRunCritestParallelGroup runs a stand-in critest that, as critest does
// with -parallel, runs the ginkgo command beside it (found on PATH), which
// starts a node process; when the run's context ends, critest, ginkgo and
// the node are all killed, not critest alone.
func TestRunCritestParallelGroup(t *testing.T) {
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "node.pid")
	ginkgo := "#!/bin/sh\nsleep 300 &\necho $! > " + pidFile + "\nwait\n"
	if err := os.WriteFile(critestGinkgo(filepath.Join(dir, "critest")), []byte(ginkgo), 0o755); err != nil {
		t.Fatal(err)
	}
	bin := standInCritest(t, dir, "", "ginkgo")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := runCritest(ctx, bin, "unix:///nowhere.sock", filepath.Join(dir, "junit.xml"), filepath.Join(dir, "critest.log"), nil)
		done <- err
	}()
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			cancel()
			log, _ := os.ReadFile(filepath.Join(dir, "critest.log"))
			t.Fatalf("the stand-in ginkgo never started its node (found on PATH?); critest's log:\n%s", log)
		}
		b, _ := os.ReadFile(pidFile)
		pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
	}
	cancel()
	if err := <-done; err == nil {
		t.Error("runCritest of a cancelled run: no error")
	}
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("ginkgo's node (pid %d) still runs after the run's context ended", pid)
		}
	}
}
