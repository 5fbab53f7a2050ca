package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// skipEntry is one line of the skip list: a ginkgo regexp and why.
type skipEntry struct{ pattern, reason string }

// readSkipList reads "REGEXP | reason" lines; '#' starts a comment line.
func readSkipList(path string) ([]skipEntry, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the list %s: %w", path, err)
	}
	return parseSkipList(b)
}

func parseSkipList(b []byte) ([]skipEntry, error) {
	var out []skipEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		pattern, reason, ok := strings.Cut(line, " | ")
		if !ok || strings.TrimSpace(pattern) == "" || strings.TrimSpace(reason) == "" {
			return nil, fmt.Errorf("list line %d: want \"REGEXP | reason\", got %q", n, line)
		}
		out = append(out, skipEntry{strings.TrimSpace(pattern), strings.TrimSpace(reason)})
	}
	return out, sc.Err()
}

// critestFloors is how many critest specs must pass, per backend label, for
// parity to mean anything: a critest that ran nothing passes the same
// (empty) set both ways. These are the counts measured with this skip list
// (docs/reports/conformance.md), critest v1.37.0: containerd 1.6.20 91; containerd
// 2.4.2 with runc 1.5.2 124 (user namespaces and, with --critest-nri, NRI
// included); containerd 2.3.7 with runc 1.5.2 123 (the same, less the pod
// sandbox metrics spec); containerd 1.7.35 with runc 1.3.6 93 (no NRI, no
// user namespaces; critest runs there in make conformance, not in make
// test); containerd 2.0.14 with runc 1.3.6 105 (user namespaces included, on
// the pod network; no NRI specs: its NRI cannot adjust namespaces).
// containerd 2.1.4's 92 was measured with critest v1.34.0, a floor still.
var critestFloors = map[string]int{"containerd-1.6": 91, "containerd-1.7": 93, "containerd-2.0": 105, "containerd-2.1": 92, "containerd-2.3": 123, "containerd-2.4": 124}

// runCritest runs critest against endpoint, writing its JUnit report to
// junit and its output to log, and returns the report. critest's exit
// status must agree with the report it wrote: exit 0 with no failed spec, or
// exit 1 (go test's "FAIL") with at least one. Anything else (it could not
// start, was killed, panicked, timed out, or wrote no report) is an error: a
// run that did not finish must not count as a result.
func runCritest(ctx context.Context, bin, endpoint, junit, log string, skips []skipEntry, extra ...string) (junitResult, error) {
	args := critestArgs(endpoint, junit, skips, extra)
	// a report left by an earlier run must not stand in for this one's
	for _, p := range []string{junit, jsonReport(junit)} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return junitResult{}, err
		}
	}
	f, err := os.Create(log)
	if err != nil {
		return junitResult{}, err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = filepath.Dir(junit)
	// In parallel, critest runs the ginkgo command (critestGinkgo, found on
	// PATH), which runs a process per node: all of them are one process
	// group, killed together if ctx ends.
	cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(critestGinkgo(bin))+string(os.PathListSeparator)+os.Getenv("PATH"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	start := time.Now()
	err = cmd.Run()
	fmt.Printf("  critest finished in %s (%v); log %s\n", time.Since(start).Round(time.Second), exitText(err), log)
	return critestResult(err, junit, log)
}

// critestArgs are critest's arguments for a run against endpoint that
// writes its reports beside junit.
func critestArgs(endpoint, junit string, skips []skipEntry, extra []string) []string {
	args := append([]string{
		"-runtime-endpoint", endpoint, "-image-endpoint", endpoint,
		"-ginkgo.junit-report", junit, "-ginkgo.json-report", jsonReport(junit),
		"-ginkgo.no-color", "-ginkgo.timeout", "30m",
		// a spec that fails is run once more, both ways alike (ginkgo's
		// own retry, as Kubernetes' CI runs e2e): one timing miss of an
		// upstream spec must not decide parity; every retry is named in
		// the output and in critest-parity-*.json
		"-ginkgo.flake-attempts", strconv.Itoa(critestAttempts),
		// critest's own parallel mode, as CRI-O's CI runs it: its specs
		// wait on containers more than they compute (critestNodes)
		"-parallel", strconv.Itoa(critestNodes),
	}, extra...)
	for _, s := range skips {
		args = append(args, "-ginkgo.skip", s.pattern)
	}
	return args
}

// critestResult checks critest's exit (err from exec.Cmd.Run) against the
// report it wrote.
func critestResult(runErr error, junit, log string) (junitResult, error) {
	code := 0
	if runErr != nil {
		var exit *exec.ExitError
		if !errors.As(runErr, &exit) {
			return junitResult{}, fmt.Errorf("critest did not run: %w", runErr)
		}
		if code = exit.ExitCode(); code != 1 { // -1: killed by a signal
			return junitResult{}, fmt.Errorf("critest did not finish (%v); see %s", runErr, log)
		}
	}
	r, err := readJUnit(junit)
	if err == nil {
		r.Retried, err = readRetried(jsonReport(junit))
	}
	if err != nil {
		return junitResult{}, fmt.Errorf("critest (%s) left no readable report: %w; see %s", exitText(runErr), err, log)
	}
	switch {
	case code == 0 && len(r.Failed) > 0:
		return r, fmt.Errorf("critest exited 0 but its report has %d failed specs; see %s", len(r.Failed), log)
	case code == 1 && len(r.Failed) == 0:
		return r, fmt.Errorf("critest exited 1 but its report has no failed spec: it did not finish; see %s", log)
	case len(r.Passed)+len(r.Failed) == 0:
		return r, fmt.Errorf("critest ran no spec; see %s", log)
	}
	return r, nil
}

// critestAttempts is how many times a failing critest spec is run before
// it counts as failed.
const critestAttempts = 2

// critestNodes is how many of its specs critest runs at once (its
// -parallel: ginkgo's nodes). On 2 cores, 4 took critest's run through the
// shim on containerd 2.4 from 153 s to 92 s, with the same 124 specs
// passed both ways; the direct run, parity's baseline, runs alike.
const critestNodes = 4

// critestGinkgo is the ginkgo command critest runs in parallel: built
// beside it (make conformance-tools, from hack/critest's go.mod, so of the
// version critest is built with).
func critestGinkgo(critest string) string { return filepath.Join(filepath.Dir(critest), "ginkgo") }

// jsonReport is where ginkgo's JSON report goes, beside the JUnit one: only
// it records how many attempts a spec took.
func jsonReport(junit string) string { return strings.TrimSuffix(junit, ".xml") + ".json" }

// readRetried reads ginkgo's JSON report for the specs that passed only on
// a later attempt.
func readRetried(path string) ([]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read ginkgo's JSON report: %w", err)
	}
	var reports []struct {
		SpecReports []struct {
			ContainerHierarchyTexts []string
			LeafNodeText            string
			State                   string
			NumAttempts             int
		}
	}
	if err := json.Unmarshal(b, &reports); err != nil {
		return nil, fmt.Errorf("parse ginkgo's JSON report: %w", err)
	}
	var retried []string
	for _, r := range reports {
		for _, s := range r.SpecReports {
			if s.State == "passed" && s.NumAttempts > 1 {
				retried = append(retried, strings.Join(append(slices.Clone(s.ContainerHierarchyTexts), s.LeafNodeText), " "))
			}
		}
	}
	slices.Sort(retried)
	return retried, nil
}

func exitText(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}
