package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/cri-nstarget/cri-nstarget/conformance/claims"
	"github.com/cri-nstarget/cri-nstarget/internal/baseline"
	"github.com/cri-nstarget/cri-nstarget/internal/critest"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// usernsBackends are the backends whose default runtime handler must support
// user namespaces (containerd 2.4.2 and 2.3.7 with runc 1.5.2, 2.0.14 with
// runc 1.3.6; 2.0 only with a pod network: make runs its suite with
// --suite-pod-network-mode pod): there, the suite's user-namespace cases
// must run, and a backend that stops reporting support fails them instead of
// skipping them. containerd 1.7 reports none, 1.6 has none.
var usernsBackends = map[string]bool{"containerd-2.4": true, "containerd-2.3": true, "containerd-2.0": true}

// runOptions configure one backend's run.
type runOptions struct {
	backend       string // label, e.g. "containerd-1.6"
	containerd    string
	configVersion int
	shim          string
	suite         string
	suiteRun      string
	suiteNetwork  string
	suiteUserns   bool // the suite fails, not skips, its user-namespace cases without support
	critest       string
	critestSkip   string
	critestNRI    bool
	critestFloor  int    // specs that must pass, directly and through the shim
	directCache   string // where critest's direct runs are kept by their key; "" runs it every time
	busybox       string
	standin       string
	out           string
	modes         []string
}

func runCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	var o runOptions
	var modes string
	fs.StringVar(&o.backend, "backend", "", "label of the backend in report names (default: containerd-MAJOR.MINOR from --version)")
	fs.StringVar(&o.containerd, "containerd", "containerd", "containerd binary (a containerd-shim-runc-v2 beside it is used for 2.x)")
	fs.IntVar(&o.configVersion, "config-version", 0, "containerd config version: 2 (1.6, 1.7), 3 (2.0-2.3) or 4 (2.4 and later); 0 detects it from containerd --version")
	fs.StringVar(&o.shim, "shim", "bin/cri-nstarget", "cri-nstarget binary")
	fs.StringVar(&o.suite, "suite", "", "the TARGET suite, nstarget-conformance as released (make conformance-suite); empty skips it")
	fs.StringVar(&o.suiteRun, "suite-run", "", "only the suite's cases matching this -test.run pattern (e.g. TestTarget/pid-reuse)")
	fs.StringVar(&o.suiteNetwork, "suite-pod-network-mode", "host", "the suite's --pod-network-mode: host, or pod (on the CNI bridge)")
	fs.BoolVar(&o.suiteUserns, "suite-require-userns", false, "the suite's --require-userns: its user-namespace cases fail instead of skipping when the backend reports no support; default: on for the backends that must support them (containerd-2.4, containerd-2.3, containerd-2.0)")
	fs.StringVar(&o.critest, "critest", "", "critest binary; empty skips critest")
	fs.BoolVar(&o.critestNRI, "critest-nri", false, "run critest's NRI specs too, on the backend's NRI socket (containerd 2.x)")
	fs.StringVar(&o.critestSkip, "critest-skip", "hack/critest/skip.txt", "critest skip list (REGEXP | reason)")
	fs.IntVar(&o.critestFloor, "critest-min-pass", 0, "critest specs that must pass, directly and through the shim; 0: the floor recorded for the backend (containerd-1.6: 91, containerd-1.7: 93, containerd-2.0: 105, containerd-2.1: 92, containerd-2.3: 123, containerd-2.4: 124)")
	fs.StringVar(&o.directCache, "critest-direct-cache", "/var/cache/cri-nstarget/critest-direct", "where critest's direct run is kept, by a key of all it depends on (critest, containerd, its runc shim, runc and the CNI plugins by their hashes, containerd's config, the skip list, critest's arguments, the images, the kernel), and reused while the key is the same; empty: run it every time")
	fs.StringVar(&o.busybox, "critest-busybox", harness.BusyboxPath, "static busybox critest's stand-in images are built from (hack/busybox-full.sh has ipcs and pgrep)")
	fs.StringVar(&o.standin, "critest-standin", "bin/critest-standin", "static stand-in binary for critest's pause, nginx, httpd and nonewprivs images (hack/critest/standin)")
	fs.StringVar(&o.out, "out", "bin/conformance", "directory for reports and logs")
	fs.StringVar(&modes, "modes", "direct,shim,shim-strict", "endpoints to test: direct (containerd's CRI), shim (cri-nstarget in front), shim-strict (with --strict-targeting; the suite only), shim-update (with --targeting-via update, for backends with NRI; the suite only), plugin (containerd's CRI with cri-nstarget --mode plugin on its NRI, containerd 2.2 and later; the suite's claimed cases only, the others reported not claimed)")
	fs.Parse(args)
	o.modes = strings.Split(modes, ",")
	if os.Geteuid() != 0 {
		return errors.New("run: needs root (containerd, runc, namespace pins, CNI)")
	}
	var err error
	for _, p := range []*string{&o.shim, &o.suite, &o.critest, &o.critestSkip, &o.standin, &o.out, &o.directCache} {
		if *p != "" {
			if *p, err = filepath.Abs(*p); err != nil {
				return err
			}
		}
	}
	if o.critest != "" && o.busybox == "" {
		return errors.New("run: --critest-busybox is empty (did hack/busybox-full.sh fail?)")
	}
	if o.backend == "" {
		if o.backend, err = critest.BackendLabel(o.containerd); err != nil {
			return err
		}
	}
	usernsSet := false
	fs.Visit(func(f *flag.Flag) { usernsSet = usernsSet || f.Name == "suite-require-userns" })
	if !usernsSet {
		o.suiteUserns = usernsBackends[o.backend]
	}
	if o.critest != "" && o.critestFloor == 0 {
		if o.critestFloor = critestFloors[o.backend]; o.critestFloor == 0 {
			return fmt.Errorf("run: no critest floor recorded for %s: give --critest-min-pass", o.backend)
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	if o.suite != "" {
		// Which build runs, in the leg's log: the one make release ships.
		v, err := exec.CommandContext(ctx, o.suite, "--version").Output()
		if err != nil {
			return fmt.Errorf("run: %s --version: %w", o.suite, err)
		}
		fmt.Printf("• suite: %s", v)
	}
	return run(ctx, o)
}

func run(ctx context.Context, o runOptions) (err error) {
	start := time.Now()
	// containerd's directory is below tmp: DirMode, or containers in a user
	// namespace cannot reach their rootfs (critest's UserNamespaces specs)
	tmp, err := harness.TempDir("nsm-")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(tmp)) }()

	envOpts := harness.EnvOptions{Dir: filepath.Join(tmp, "c"), Binary: o.containerd, ConfigVersion: o.configVersion}
	var skips []skipEntry
	if o.critest != "" {
		if skips, err = readSkipList(o.critestSkip); err != nil {
			return err
		}
		if envOpts.Images, err = critest.Images(o.busybox, o.standin); err != nil {
			return err
		}
		envOpts.RegistryAliases = critest.Aliases
	}
	env, err := critest.StartBackend(ctx, o.backend, tmp, envOpts, o.critest != "" || o.suiteNetwork == "pod")
	if err != nil {
		return err
	}
	defer func() {
		if cerr := env.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()

	// What decides the exit status: the suite's cases through the shim,
	// critest parity, and anything that kept a run from finishing or
	// cleaning up. Runs against containerd directly are measurements.
	var failures []error
	passed, failedCases := 0, 0
	junits := map[string]string{}
	for _, mode := range o.modes {
		name := o.backend + "-" + mode
		endpoint := env.Containerd.Endpoint()
		var shim *harness.Shim
		switch mode {
		case "direct":
		case "shim", "shim-strict", "shim-update":
			var flags []string
			switch mode {
			case "shim-strict":
				flags = append(flags, "--strict-targeting")
			case "shim-update":
				flags = append(flags, "--targeting-via", "update")
			}
			if shim, err = harness.StartShim(ctx, o.shim, filepath.Join(tmp, mode), env.Containerd, flags...); err != nil {
				return err
			}
			endpoint = shim.Endpoint()
		case "plugin":
			// the suite on containerd's own endpoint, the plugin on its NRI
			if shim, err = harness.StartPlugin(ctx, o.shim, filepath.Join(tmp, mode), env.Containerd, "--metrics-address", "127.0.0.1:0"); err != nil {
				return err
			}
		default:
			return fmt.Errorf("mode %q: want direct, shim, shim-strict, shim-update or plugin", mode)
		}
		fmt.Printf("• %s: %s\n", name, endpoint)
		if o.suite != "" {
			var pass, fail int
			var err error
			if mode == "plugin" {
				pass, fail, err = runPluginSuite(ctx, o, name, endpoint, env.BusyboxImage, shim)
			} else {
				pass, fail, err = runSuite(ctx, o, name, endpoint, env.BusyboxImage)
			}
			switch {
			case err != nil:
				failures = append(failures, err)
			case mode != "direct":
				passed += pass
				if fail > 0 {
					failedCases += fail - 1 // the error below counts one
					how := "through the shim"
					if mode == "plugin" {
						how = "with the plugin attached"
					}
					failures = append(failures, fmt.Errorf("%s: %d cases of the TARGET suite failed %s", name, fail, how))
				}
			}
		}
		if o.critest != "" && (mode == "direct" || mode == "shim") { // critest sends no TARGET: strict and the targeting path change nothing for it
			junit, err := critestStep(ctx, o, env, mode, endpoint, skips, envOpts.Images)
			if err != nil {
				failures = append(failures, err)
			} else if junit != "" {
				junits[mode] = junit // below the floor too: parity names the specs
			}
		}
		if shim != nil {
			if err := shim.Close(); err != nil {
				failures = append(failures, fmt.Errorf("stop shim: %w", err))
			}
			if m, err := harness.MountsUnder(shim.StateDir()); err != nil || len(m) > 0 {
				failures = append(failures, fmt.Errorf("%s: pins left mounted after the runs: %v %v", name, m, err))
				failures = append(failures, harness.UnmountAll(shim.StateDir()))
			}
		}
	}
	if junits["direct"] != "" && junits["shim"] != "" {
		if err := parity(o, junits["direct"], junits["shim"]); err != nil {
			failures = append(failures, err)
		} else {
			passed++
		}
	}
	fmt.Printf("• %s: done in %s; checks that decide the run (suite through the shim, critest parity, clean runs):\n", o.backend, time.Since(start).Round(time.Second))
	fmt.Printf("%s: %d passed, %d failed\n", o.backend, passed, failedCases+len(failures))
	return errors.Join(failures...)
}

// critestStep runs critest against endpoint (mode direct or shim) and
// checks its floor; it returns the JUnit report when critest ran to one.
// The direct run is containerd's baseline: with o.directCache it is kept
// under its key (directKeyOf) and reused while the key is the same.
func critestStep(ctx context.Context, o runOptions, env *critest.Backend, mode, endpoint string, skips []skipEntry, images map[string]*harness.Image) (string, error) {
	name := o.backend + "-" + mode
	junit := filepath.Join(o.out, "critest-"+name+".xml")
	log := filepath.Join(o.out, "critest-"+name+".log")
	var extra []string
	if o.critestNRI {
		// critest's NRI specs register a plugin of their own on
		// containerd's NRI socket: directly it is the only one,
		// through the shim it runs beside the shim's
		if _, err := os.Stat(env.Containerd.NRISocket()); err != nil {
			return "", fmt.Errorf("--critest-nri: %s serves no NRI socket: %w", o.backend, err)
		}
		extra = append(extra, "-nri-socket", env.Containerd.NRISocket())
	}
	var key string
	cache := baseline.Cache{Dir: o.directCache, Kind: "critest-direct"}
	if mode == "direct" && o.directCache != "" {
		k, err := directKeyOf(o, env, skips, extra, images)
		if err == nil {
			key, err = k.sum()
		}
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		r, ok, err := restoreDirect(cache, key, junit, log)
		if err != nil {
			return "", fmt.Errorf("%s: %w", name, err)
		}
		if ok {
			fmt.Printf("  direct run: cached, key %s (%s); critest not run against containerd\n", key, cache.Path(key))
			return junit, errors.Join(critestFloor(o, name, r)...)
		}
	}
	r, err := runCritest(ctx, o.critest, endpoint, junit, log, skips, extra...)
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	failed := critestFloor(o, name, r)
	if key != "" {
		if len(failed) > 0 || len(r.Failed) > 0 {
			fmt.Printf("  direct run: ran, key %s; not kept (failed specs, or below the floor)\n", key)
		} else if err := cache.Store(key, critestFiles(junit, log)); err != nil {
			return junit, fmt.Errorf("%s: keep the direct run: %w", name, err)
		} else {
			fmt.Printf("  direct run: ran, key %s; kept in %s\n", key, cache.Path(key))
		}
	}
	return junit, errors.Join(failed...)
}

// directKeyOf gathers what critest's direct run depends on (directKey).
func directKeyOf(o runOptions, env *critest.Backend, skips []skipEntry, extra []string, images map[string]*harness.Image) (directKey, error) {
	dir := env.Containerd.Dir
	tmp := filepath.Dir(dir)
	ph := []string{dir, "$DIR", tmp, "$TMP", env.Registry.Host(), "$REGISTRY"}
	if br := env.Bridge(); br != nil {
		ph = append(ph, br.Name, "$BRIDGE", br.Subnet, "$SUBNET")
	}
	k := directKey{Skips: skips, Images: map[string]string{}, Binaries: map[string]string{
		"critest": o.critest, "ginkgo": critestGinkgo(o.critest), "containerd": o.containerd,
		"containerd-shim-runc-v2": filepath.Join(filepath.Dir(o.containerd), "containerd-shim-runc-v2"),
	}}
	if p, err := exec.LookPath(cmp.Or(os.Getenv("NSTARGET_RUNC"), "runc")); err == nil {
		k.Binaries["runc"] = p
	} else {
		return k, fmt.Errorf("the direct run's key: runc: %w", err)
	}
	plugins, err := filepath.Glob(filepath.Join(harness.CNIBinDir, "*"))
	if err != nil {
		return k, err
	}
	for _, p := range plugins {
		k.Binaries["cni "+filepath.Base(p)] = p
	}
	for name, img := range images {
		k.Images[name] = img.ManifestDigest.String()
	}
	for _, a := range critestArgs("$ENDPOINT", "$OUT/critest.xml", skips, extra) {
		k.Args = append(k.Args, placeholders(a, ph...))
	}
	config, err := os.ReadFile(filepath.Join(dir, "config.toml"))
	if err != nil {
		return k, err
	}
	k.Config = placeholders(string(config), ph...)
	if cni, err := os.ReadFile(filepath.Join(dir, "cni", "10-nstarget.conflist")); err == nil {
		k.CNI = placeholders(string(cni), ph...)
	}
	k.Kernel, err = kernelRelease()
	return k, err
}

// runSuite runs the TARGET suite binary and counts its passed and failed
// cases; err means it did not run to a report.
func runSuite(ctx context.Context, o runOptions, name, endpoint, image string, extra ...string) (pass, fail int, err error) {
	report := filepath.Join(o.out, "suite-"+name+".json")
	logPath := filepath.Join(o.out, "suite-"+name+".log")
	os.Remove(report)
	var buf bytes.Buffer
	args := []string{"--runtime-endpoint", endpoint, "--test-image", image, "--report", report, "--label", name,
		"--pod-network-mode", o.suiteNetwork, "-test.v", "-test.timeout", "30m"}
	if o.suiteRun != "" {
		args = append(args, "-test.run", o.suiteRun)
	}
	if o.suiteUserns {
		args = append(args, "--require-userns")
	}
	args = append(args, extra...)
	cmd := exec.CommandContext(ctx, o.suite, args...)
	cmd.Stdout, cmd.Stderr = &buf, &buf
	runErr := cmd.Run()
	if err := os.WriteFile(logPath, buf.Bytes(), 0o644); err != nil {
		return 0, 0, err
	}
	// The suite's own summary: one line per case.
	if i := bytes.Index(buf.Bytes(), []byte("--- nstarget conformance:")); i >= 0 {
		fmt.Print(indent(string(buf.Bytes()[i:])))
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		return 0, 0, fmt.Errorf("%s: the suite wrote no report (%v); see %s", name, runErr, logPath)
	}
	var r suiteReport
	if err := json.Unmarshal(raw, &r); err != nil {
		return 0, 0, fmt.Errorf("%s: %w", report, err)
	}
	skip, unclaimed := 0, 0
	for _, res := range r.Results {
		switch res.Result {
		case "pass":
			pass++
		case "fail":
			fail++
		case claims.NotClaimed:
			unclaimed++
		default:
			skip++
		}
	}
	fmt.Printf("  suite %s: %d pass, %d fail, %d skip, %d not claimed; log %s\n", name, pass, fail, skip, unclaimed, logPath)
	if runErr != nil && fail == 0 {
		return pass, fail, fmt.Errorf("%s: the suite exited with %v but reported no failed case; see %s", name, runErr, logPath)
	}
	return pass, fail, nil
}

func indent(s string) string {
	var b strings.Builder
	for _, l := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		if l == "PASS" || l == "FAIL" || strings.HasPrefix(l, "conformance: ") {
			continue // go test's and the suite's closing lines: counted by the caller
		}
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// critestFloor prints a critest run's counts and the specs that passed
// only on a later attempt; a run below the floor is a failure that names
// its failed specs.
func critestFloor(o runOptions, name string, r junitResult) []error {
	fmt.Printf("  critest %s: %d pass, %d fail, %d skip (%.0fs); floor %d\n", name, len(r.Passed), len(r.Failed), len(r.Skipped), r.Seconds, o.critestFloor)
	for _, n := range r.Retried {
		fmt.Printf("  critest %s: passed on a later attempt (of %d): %s\n", name, critestAttempts, n)
	}
	if len(r.Passed) >= o.critestFloor {
		return nil
	}
	failed := "none (the rest were skipped)"
	if len(r.Failed) > 0 {
		failed = strings.Join(r.Failed, "; ")
	}
	return []error{fmt.Errorf("%s: critest passed %d specs, fewer than the floor of %d; failed: %s", name, len(r.Passed), o.critestFloor, failed)}
}

// parity compares critest's passing specs direct and through the shim and
// writes the comparison next to the reports.
func parity(o runOptions, direct, shim string) error {
	base, err := readJUnit(direct)
	if err != nil {
		return err
	}
	other, err := readJUnit(shim)
	if err != nil {
		return err
	}
	d := compareJUnit(base, other)
	text := d.String(filepath.Base(direct), filepath.Base(shim))
	fmt.Print(indent(text))
	summary := map[string]any{
		"backend": o.backend, "same": d.Same(),
		"direct": counts(base), "shim": counts(other),
		"onlyDirect": d.onlyBase, "onlyShim": d.onlyOther,
		"attempts": critestAttempts,
	}
	b, _ := json.MarshalIndent(summary, "", "  ")
	if err := os.WriteFile(filepath.Join(o.out, "critest-parity-"+o.backend+".json"), append(b, '\n'), 0o644); err != nil {
		return err
	}
	if !d.Same() {
		return fmt.Errorf("%s: critest passes different specs directly and through the shim", o.backend)
	}
	return nil
}

func counts(r junitResult) map[string]any {
	return map[string]any{"passed": len(r.Passed), "failed": len(r.Failed), "skipped": len(r.Skipped), "seconds": r.Seconds, "failedSpecs": r.Failed, "retriedSpecs": r.Retried}
}
