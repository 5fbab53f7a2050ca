package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/cri-nstarget/cri-nstarget/internal/critest"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// critestOptions configure `nstarget-bench critest`: critest -benchmark
// against one private containerd, directly and through the shim.
type critestOptions struct {
	backend       string
	containerd    string
	configVersion int
	shim          string
	critest       string
	busybox       string
	standin       string
	out           string
	rounds        int
	params        benchParams
}

// benchParams is critest's -benchmarking-params-file (BenchmarkingParamsType
// in cri-tools' pkg/framework/test_context.go); zero fields are left out so
// that critest's defaults apply.
type benchParams struct {
	ContainersNumber         int `json:"containersNumber,omitempty"`
	ContainersNumberParallel int `json:"containersNumberParallel,omitempty"`
	PodsNumber               int `json:"podsNumber,omitempty"`
	PodsNumberParallel       int `json:"podsNumberParallel,omitempty"`
	ImagesNumber             int `json:"imagesNumber,omitempty"`
	ImagesNumberParallel     int `json:"imagesNumberParallel,omitempty"`
}

// critestCmd is `nstarget-bench critest [flags]`.
func critestCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("critest", flag.ExitOnError)
	var o critestOptions
	fs.StringVar(&o.backend, "backend", "", "label of the backend (default: containerd-MAJOR.MINOR from --version)")
	fs.StringVar(&o.containerd, "containerd", "containerd", "containerd binary")
	fs.IntVar(&o.configVersion, "config-version", 0, "containerd config version: 2 or 3; 0 detects it")
	fs.StringVar(&o.shim, "shim-binary", "bin/cri-nstarget", "cri-nstarget binary")
	fs.StringVar(&o.critest, "critest", "bin/critest", "critest binary")
	fs.StringVar(&o.busybox, "critest-busybox", harness.BusyboxPath, "static busybox the images are built from (hack/busybox-full.sh)")
	fs.StringVar(&o.standin, "critest-standin", "bin/critest-standin", "stand-in binary for critest's pause, nginx, httpd and nonewprivs images")
	fs.StringVar(&o.out, "out", "bin/bench-critest", "directory for critest's data, reports, logs and the summary")
	fs.IntVar(&o.rounds, "rounds", 8, "critest runs per side; direct goes first in odd rounds, the shim in even ones")
	fs.IntVar(&o.params.PodsNumber, "pods", 20, "samples of the PodSandbox lifecycle benchmark per critest run")
	fs.IntVar(&o.params.ContainersNumber, "containers", 20, "samples of the Container lifecycle benchmark per critest run")
	fs.IntVar(&o.params.ImagesNumber, "images", 20, "samples of each Image benchmark (pull/status/remove, list) per critest run")
	var parallel int
	fs.IntVar(&parallel, "parallel", 1, "lifecycles run in parallel within each benchmark (critest's *NumberParallel)")
	fs.Parse(args)
	o.params.PodsNumberParallel, o.params.ContainersNumberParallel, o.params.ImagesNumberParallel = parallel, parallel, parallel
	if os.Geteuid() != 0 {
		return errors.New("critest: needs root (containerd, runc, CNI)")
	}
	if o.rounds < 1 {
		return fmt.Errorf("critest: --rounds %d: want at least 1", o.rounds)
	}
	if o.busybox == "" {
		return errors.New("critest: --critest-busybox is empty (did hack/busybox-full.sh fail?)")
	}
	var err error
	for _, p := range []*string{&o.shim, &o.critest, &o.standin, &o.out} {
		if *p, err = filepath.Abs(*p); err != nil {
			return err
		}
	}
	if o.backend == "" {
		if o.backend, err = critest.BackendLabel(o.containerd); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(o.out); err != nil {
		return err
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		return err
	}
	return critestBench(ctx, o)
}

// critestBench runs critest -benchmark against one containerd and one shim
// in front of it, alternating, and writes the side-by-side summary.
func critestBench(ctx context.Context, o critestOptions) (err error) {
	start := time.Now()
	tmp, err := harness.TempDir("nsb-") // containerd's dir is below: see harness.DirMode
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(tmp)) }()

	images, err := critest.BenchImages(o.busybox, o.standin)
	if err != nil {
		return err
	}
	envOpts := harness.EnvOptions{Dir: filepath.Join(tmp, "c"), Binary: o.containerd, ConfigVersion: o.configVersion,
		Images: images, RegistryAliases: append(slices.Clone(critest.Aliases), critest.BenchAliases...)}
	env, err := critest.StartBackend(ctx, o.backend, tmp, envOpts, true)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := env.Close(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()
	shim, err := harness.StartShim(ctx, o.shim, filepath.Join(tmp, "shim"), env.Containerd)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := shim.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("stop shim: %w", cerr))
		}
		if m, merr := harness.MountsUnder(shim.StateDir()); merr != nil || len(m) > 0 {
			err = errors.Join(err, fmt.Errorf("pins left mounted after the runs: %v %v", m, merr), harness.UnmountAll(shim.StateDir()))
		}
	}()
	paramsFile := filepath.Join(o.out, "params.json") // YAML is a superset of JSON
	b, _ := json.MarshalIndent(o.params, "", "  ")
	if err := os.WriteFile(paramsFile, append(b, '\n'), 0o644); err != nil {
		return err
	}
	endpoints := map[string]string{"direct": env.Containerd.Endpoint(), "shim": shim.Endpoint()}
	version, err := shimVersion(o.shim)
	if err != nil {
		return err
	}
	fmt.Printf("• critest -benchmark: %d rounds, direct %s, shim %s (%s); params %s\n",
		o.rounds, endpoints["direct"], endpoints["shim"], version, compactJSON(b))

	results := map[string]*benchSide{"direct": newBenchSide(), "shim": newBenchSide()}
	var failures []error
	for r := 1; r <= o.rounds; r++ {
		order := []string{"direct", "shim"}
		if r%2 == 0 {
			order = []string{"shim", "direct"}
		}
		for _, side := range order {
			dir := filepath.Join(o.out, fmt.Sprintf("%s-%d", side, r))
			if err := runCritestBench(ctx, o.critest, endpoints[side], paramsFile, dir); err != nil {
				failures = append(failures, fmt.Errorf("%s round %d: %w", side, r, err))
			}
			if err := results[side].add(dir); err != nil {
				failures = append(failures, fmt.Errorf("%s round %d: %w", side, r, err))
			}
			if ctx.Err() != nil {
				return errors.Join(append(failures, ctx.Err())...)
			}
		}
	}

	table := benchTable(results["direct"], results["shim"])
	specs := specTable(results["direct"], results["shim"], o.rounds)
	summary := fmt.Sprintf("%s, %s, critest %s -benchmark, %d rounds a side, alternating; params %s; %s\n\n%s\n%s",
		o.backend, version, critest.Version(critest.GoMod), o.rounds, compactJSON(b), time.Since(start).Round(time.Second), table, specs)
	fmt.Print("\n" + summary)
	if err := os.WriteFile(filepath.Join(o.out, "summary.md"), []byte(summary), 0o644); err != nil {
		failures = append(failures, err)
	}
	raw, _ := json.MarshalIndent(map[string]any{"backend": o.backend, "rounds": o.rounds, "params": o.params,
		"direct": results["direct"], "shim": results["shim"]}, "", "  ")
	if err := os.WriteFile(filepath.Join(o.out, "samples.json"), append(raw, '\n'), 0o644); err != nil {
		failures = append(failures, err)
	}
	fmt.Printf("• %s: done in %s; data, reports and logs in %s\n", o.backend, time.Since(start).Round(time.Second), o.out)
	return errors.Join(failures...)
}

// exitStatus is how a command ended, for a log line.
func exitStatus(err error) string {
	if err == nil {
		return "exit 0"
	}
	return err.Error()
}

// shimVersion is the shim's --version and the start of its sha256, which
// tells apart builds of a dirty tree.
func shimVersion(bin string) (string, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%s, sha256 %x", strings.TrimSpace(string(out)), sum[:6]), nil
}

func compactJSON(b []byte) string {
	var out strings.Builder
	var v map[string]int
	if json.Unmarshal(b, &v) != nil {
		return string(b)
	}
	keys := make([]string, 0, len(v))
	for k := range v {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for i, k := range keys {
		if i > 0 {
			out.WriteString(", ")
		}
		fmt.Fprintf(&out, "%s %d", k, v[k])
	}
	return out.String()
}

// runCritestBench runs `critest -benchmark` against endpoint; critest's
// data files, its JUnit and JSON reports and its log go to dir.
func runCritestBench(ctx context.Context, bin, endpoint, params, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	log := filepath.Join(dir, "critest.log")
	f, err := os.Create(log)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := exec.CommandContext(ctx, bin, "-benchmark",
		"-runtime-endpoint", endpoint, "-image-endpoint", endpoint,
		"-benchmarking-params-file", params, "-benchmarking-output-dir", dir,
		"-ginkgo.junit-report", filepath.Join(dir, "junit.xml"),
		"-ginkgo.json-report", filepath.Join(dir, "report.json"),
		"-ginkgo.no-color", "-ginkgo.timeout", "30m")
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Dir = dir
	start := time.Now()
	err = cmd.Run()
	fmt.Printf("  %s: critest -benchmark finished in %s (%v); log %s\n", filepath.Base(dir), time.Since(start).Round(time.Second), exitStatus(err), log)
	if _, serr := os.Stat(filepath.Join(dir, "junit.xml")); serr != nil {
		return fmt.Errorf("critest wrote no junit report (%v); see %s", err, log)
	}
	return nil // failed specs are in the reports, and in the table
}

// lifecycleResults is what critest's lifecycle benchmarks write
// (LifecycleBenchmarksResultsSet in cri-tools' pkg/benchmark/util.go).
type lifecycleResults struct {
	OperationsNames []string `json:"operationsNames"`
	Datapoints      []struct {
		OperationsDurationsNs []int64 `json:"operationsDurationsNs"`
	} `json:"datapoints"`
}

// benchFiles are critest's data files, in table order, and the benchmark
// each belongs to.
var benchFiles = []struct{ file, benchmark string }{
	{"pod_benchmark_data.json", "PodSandbox lifecycle"},
	{"container_benchmark_data.json", "Container lifecycle"},
	{"image_lifecycle_benchmark_data.json", "Image pull/status/remove"},
	{"image_listing_benchmark_data.json", "Image listing"},
}

// fromScratch is the benchmark that only reports through ginkgo: one
// gmeasure duration per run (pkg/benchmark/pod_container.go).
const fromScratch = "Pod + container from scratch"

// benchSide is one endpoint's samples over all rounds: durations in ns by
// "benchmark\x00operation", and each spec's outcome per round.
type benchSide struct {
	Samples map[string][]int64  `json:"samples"`
	Order   []string            `json:"order"`
	Specs   map[string][]string `json:"specs"`
	Seconds []float64           `json:"seconds"`
}

func newBenchSide() *benchSide {
	return &benchSide{Samples: map[string][]int64{}, Specs: map[string][]string{}}
}

func (s *benchSide) record(benchmark, op string, ns int64) {
	k := benchmark + "\x00" + op
	if _, ok := s.Samples[k]; !ok {
		s.Order = append(s.Order, k)
	}
	s.Samples[k] = append(s.Samples[k], ns)
}

// add reads one critest run's data files and reports from dir.
func (s *benchSide) add(dir string) error {
	for _, bf := range benchFiles {
		b, err := os.ReadFile(filepath.Join(dir, bf.file))
		if errors.Is(err, os.ErrNotExist) {
			continue // the spec failed or was skipped: the spec table says which
		}
		if err != nil {
			return err
		}
		var r lifecycleResults
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %w", bf.file, err)
		}
		for _, d := range r.Datapoints {
			if len(d.OperationsDurationsNs) != len(r.OperationsNames) {
				continue
			}
			var total int64
			for i, ns := range d.OperationsDurationsNs {
				s.record(bf.benchmark, r.OperationsNames[i], ns)
				total += ns
			}
			if len(r.OperationsNames) > 1 {
				s.record(bf.benchmark, "all "+fmt.Sprint(len(r.OperationsNames))+" calls", total)
			}
		}
	}
	f, err := os.Open(filepath.Join(dir, "report.json"))
	if err != nil {
		return err
	}
	defer f.Close()
	reports, err := parseGinkgoJSON(f)
	if err != nil {
		return err
	}
	for _, rep := range reports {
		s.Seconds = append(s.Seconds, rep.RunTime.Seconds())
		for _, sr := range rep.SpecReports {
			if sr.LeafNodeType != "It" || !strings.Contains(sr.LeafNodeText, "benchmark") {
				continue // critest -benchmark lists the validation specs as skipped
			}
			s.Specs[sr.LeafNodeText] = append(s.Specs[sr.LeafNodeText], sr.State)
			for _, e := range sr.ReportEntries {
				var exp struct {
					Measurements []struct {
						Name      string
						Durations []int64
					}
				}
				if json.Unmarshal([]byte(e.Value.AsJSON), &exp) != nil {
					continue
				}
				for _, m := range exp.Measurements {
					for _, ns := range m.Durations {
						s.record(fromScratch, m.Name, ns)
					}
				}
			}
		}
	}
	return nil
}

// ginkgoReport is the part of ginkgo v2's JSON report this command reads.
type ginkgoReport struct {
	RunTime     time.Duration
	SpecReports []struct {
		LeafNodeType  string
		LeafNodeText  string
		State         string
		ReportEntries []struct {
			Name  string
			Value struct{ AsJSON string }
		}
	}
}

func parseGinkgoJSON(r io.Reader) ([]ginkgoReport, error) {
	var reports []ginkgoReport
	if err := json.NewDecoder(r).Decode(&reports); err != nil {
		return nil, fmt.Errorf("parse ginkgo JSON report: %w", err)
	}
	return reports, nil
}

// quantile is the nearest-rank q-quantile of sorted ns.
func quantile(sorted []int64, q float64) int64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms(ns int64) string {
	v := float64(ns) / 1e6
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	default:
		return fmt.Sprintf("%.2f ms", v)
	}
}

func ratioText(shim, direct int64) string {
	if direct == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", float64(shim)/float64(direct))
}

// benchTable is the side-by-side table: per benchmark and operation,
// samples, median and p90 directly and through the shim, and shim/direct.
func benchTable(direct, shim *benchSide) string {
	var b strings.Builder
	b.WriteString("| benchmark | operation | n (direct/shim) | direct p50 | shim p50 | shim/direct p50 | direct p90 | shim p90 | shim/direct p90 |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|\n")
	keys := slices.Clone(direct.Order)
	for _, k := range shim.Order {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	rank := func(k string) int {
		bench, _, _ := strings.Cut(k, "\x00")
		for i, bf := range benchFiles {
			if bf.benchmark == bench {
				return i
			}
		}
		return len(benchFiles)
	}
	slices.SortStableFunc(keys, func(a, c string) int { return rank(a) - rank(c) })
	for _, k := range keys {
		bench, op, _ := strings.Cut(k, "\x00")
		d, s := sortedCopy(direct.Samples[k]), sortedCopy(shim.Samples[k])
		if strings.HasPrefix(op, "all ") {
			op = "**" + op + "**"
		}
		d50, s50, d90, s90 := quantile(d, 0.5), quantile(s, 0.5), quantile(d, 0.9), quantile(s, 0.9)
		fmt.Fprintf(&b, "| %s | %s | %d/%d | %s | %s | %s | %s | %s | %s |\n", bench, op, len(d), len(s),
			msOrDash(d, d50), msOrDash(s, s50), ratioOrDash(d, s, s50, d50), msOrDash(d, d90), msOrDash(s, s90), ratioOrDash(d, s, s90, d90))
	}
	return b.String()
}

func msOrDash(xs []int64, v int64) string {
	if len(xs) == 0 {
		return "–"
	}
	return ms(v)
}

func ratioOrDash(d, s []int64, sv, dv int64) string {
	if len(d) == 0 || len(s) == 0 {
		return "–"
	}
	return ratioText(sv, dv)
}

func sortedCopy(xs []int64) []int64 {
	out := slices.Clone(xs)
	slices.Sort(out)
	return out
}

// specTable lists critest's benchmark specs with how often each passed,
// failed or was skipped on each side.
func specTable(direct, shim *benchSide, rounds int) string {
	var names []string
	for n := range direct.Specs {
		names = append(names, n)
	}
	for n := range shim.Specs {
		if _, ok := direct.Specs[n]; !ok {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	var b strings.Builder
	fmt.Fprintf(&b, "| critest spec (%d runs a side) | direct | shim |\n|---|---|---|\n", rounds)
	for _, n := range names {
		fmt.Fprintf(&b, "| %s | %s | %s |\n", n, states(direct.Specs[n]), states(shim.Specs[n]))
	}
	fmt.Fprintf(&b, "| (critest run time, s) | %s | %s |\n", seconds(direct.Seconds), seconds(shim.Seconds))
	return b.String()
}

func states(ss []string) string {
	counts := map[string]int{}
	for _, s := range ss {
		counts[s]++
	}
	var parts []string
	for _, s := range []string{"passed", "failed", "skipped"} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s, counts[s]))
			delete(counts, s)
		}
	}
	var rest []string
	for s, n := range counts {
		rest = append(rest, fmt.Sprintf("%s %d", s, n))
	}
	slices.Sort(rest)
	return strings.Join(append(parts, rest...), ", ")
}

func seconds(xs []float64) string {
	parts := make([]string, len(xs))
	for i, x := range xs {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, ", ")
}
