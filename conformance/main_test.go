package conformance

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/conformance/claims"
)

var (
	runtimeEndpoint = flag.String("runtime-endpoint", "", "CRI runtime service endpoint, e.g. unix:///run/containerd/containerd.sock (required)")
	imageEndpoint   = flag.String("image-endpoint", "", "CRI image service endpoint (default: --runtime-endpoint)")
	testImage       = flag.String("test-image", "", "busybox-like image with sh, ps, readlink, sleep, unshare and cat (required)")
	podNetworkMode  = flag.String("pod-network-mode", "host", "network of the suite's pods: host (NamespaceMode NODE) or pod (POD, needs CNI)")
	reportPath      = flag.String("report", "", "write the results as JSON to this file")
	label           = flag.String("label", "", "name of this run in the report (e.g. containerd-1.6/shim)")
	privileged      = flag.Bool("privileged", true, "run the cases that need a privileged host-PID helper container (PID reuse)")
	caseTimeout     = flag.Duration("case-timeout", 2*time.Minute, "time limit of one case")
	pull            = flag.Bool("pull", true, "pull --test-image when the runtime does not have it")
	requireUserns   = flag.Bool("require-userns", false, "fail, instead of skipping, the user-namespace cases when the runtime does not report user-namespace support")
	cases           = flag.String("cases", "", "run only the cases whose id matches this regular expression, e.g. 'pid-target|ipc-target' or '^userns/' (--list shows the ids)")
	listCases       = flag.Bool("list", false, "print each case's id and what it accepts, and exit (needs no endpoint)")
	showVersion     = flag.Bool("version", false, "print the suite's version and exit")
	nodeMode        = flag.String("mode", claims.ModeAny, `what the endpoint claims: "" (any CRI runtime, cri-nstarget's proxy among them: every case) or "plugin" (containerd's own endpoint with cri-nstarget's plugin mode on its NRI: the cases only the proxy can pass are reported not-claimed, each with why, and a PID TARGET case also checks that containerd's spec for the debug container names the plugin's pin)`)
)

// version is the suite's release, stamped by make (-X, the VERSION that
// make release builds); a build without the stamp says so.
var version = "unstamped"

// casesFilter is --cases, compiled; nil runs every case.
var casesFilter *regexp.Regexp

// suite is what every case shares: the endpoint's clients, and the cases
// --mode does not claim.
var suite struct {
	claims  []claims.Claim
	rt      runtimeapi.RuntimeServiceClient
	img     runtimeapi.ImageServiceClient
	network runtimeapi.NamespaceMode
	version *runtimeapi.VersionResponse
}

func TestMain(m *testing.M) {
	flag.Usage = usage
	for _, a := range os.Args[1:] {
		if a == "-h" || a == "-help" || a == "--help" {
			flag.CommandLine.SetOutput(os.Stdout) // asked for: to stdout, for a pager
		}
	}
	flag.Parse()
	switch {
	case *showVersion:
		fmt.Printf("nstarget-conformance %s (the TARGET suite of cri-nstarget; CRI v1, %s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		os.Exit(0)
	case *listCases:
		for _, k := range suiteCases() {
			fmt.Printf("%-36s %s\n", k.id, k.title)
		}
		os.Exit(0)
	case *runtimeEndpoint == "" && underGoTest():
		fmt.Fprintln(os.Stderr, "conformance: skipped: no --runtime-endpoint (this suite runs against a CRI endpoint; see doc.go)")
		os.Exit(0)
	case *runtimeEndpoint == "":
		fmt.Fprintln(os.Stderr, "nstarget-conformance: --runtime-endpoint is required")
		usage()
		os.Exit(2)
	}
	if *cases != "" {
		var err error
		if casesFilter, err = regexp.Compile(*cases); err != nil {
			fmt.Fprintf(os.Stderr, "nstarget-conformance: --cases: %v\n", err)
			os.Exit(2)
		}
	}
	claimed, err := claims.Of(*nodeMode)
	if err != nil {
		fmt.Fprintln(os.Stderr, "nstarget-conformance:", err)
		os.Exit(2)
	}
	suite.claims = claimed
	if err := setUp(); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		os.Exit(2)
	}
	code := m.Run()
	printSummary()
	if err := writeReport(); err != nil {
		fmt.Fprintln(os.Stderr, "conformance:", err)
		if code == 0 {
			code = 2
		}
	}
	os.Exit(code)
}

func setUp() error {
	if *testImage == "" {
		return fmt.Errorf("--test-image is required (a busybox-like image with sh, ps, readlink, sleep, unshare, cat)")
	}
	switch *podNetworkMode {
	case "host":
		suite.network = runtimeapi.NamespaceMode_NODE
	case "pod":
		suite.network = runtimeapi.NamespaceMode_POD
	default:
		return fmt.Errorf("--pod-network-mode %q: want host or pod", *podNetworkMode)
	}
	rconn, err := dial(*runtimeEndpoint)
	if err != nil {
		return err
	}
	iconn := rconn
	if *imageEndpoint != "" && *imageEndpoint != *runtimeEndpoint {
		if iconn, err = dial(*imageEndpoint); err != nil {
			return err
		}
	}
	suite.rt = runtimeapi.NewRuntimeServiceClient(rconn)
	suite.img = runtimeapi.NewImageServiceClient(iconn)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if suite.version, err = suite.rt.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		return fmt.Errorf("CRI Version at %s: %w", *runtimeEndpoint, err)
	}
	st, err := suite.img.ImageStatus(ctx, &runtimeapi.ImageStatusRequest{Image: &runtimeapi.ImageSpec{Image: *testImage}})
	if err != nil {
		return fmt.Errorf("ImageStatus %s: %w", *testImage, err)
	}
	if st.GetImage() == nil {
		if !*pull {
			return fmt.Errorf("image %s is not present and --pull=false", *testImage)
		}
		if _, err := suite.img.PullImage(ctx, &runtimeapi.PullImageRequest{Image: &runtimeapi.ImageSpec{Image: *testImage}}); err != nil {
			return fmt.Errorf("pull %s: %w", *testImage, err)
		}
	}
	return nil
}

func dial(endpoint string) (*grpc.ClientConn, error) {
	if !strings.HasPrefix(endpoint, "unix://") && !strings.Contains(endpoint, "://") {
		endpoint = "unix://" + endpoint
	}
	conn, err := grpc.NewClient(endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(16<<20)))
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	return conn, nil
}

// Result is one case's outcome, as written to the JSON report.
type Result struct {
	Case      string  `json:"case"`
	Title     string  `json:"title"`
	Result    string  `json:"result"` // pass, fail, skip or not-claimed (--mode)
	Behaviour string  `json:"behaviour,omitempty"`
	Reason    string  `json:"reason,omitempty"`
	Seconds   float64 `json:"seconds"`
}

// Report is the JSON report of one run.
type Report struct {
	Label          string    `json:"label,omitempty"`
	Endpoint       string    `json:"endpoint"`
	RuntimeName    string    `json:"runtimeName"`
	RuntimeVersion string    `json:"runtimeVersion"`
	Started        time.Time `json:"started"`
	Results        []Result  `json:"results"`
}

var (
	resultsMu sync.Mutex
	results   []Result
	started   = time.Now()
)

func addResult(r Result) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results = append(results, r)
}

func sortedResults() []Result {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	return append([]Result(nil), results...) // in the order the cases ran
}

func printSummary() {
	counts := map[string]int{}
	fmt.Println("\n--- nstarget conformance:", *runtimeEndpoint, suite.version.GetRuntimeName(), suite.version.GetRuntimeVersion())
	for _, r := range sortedResults() {
		counts[r.Result]++
		detail := r.Behaviour
		if r.Reason != "" {
			detail = strings.TrimSuffix(r.Reason+"; "+detail, "; ")
		}
		fmt.Printf("%-4s %-40s %s\n", strings.ToUpper(r.Result), r.Case, detail)
	}
	fmt.Printf("conformance: %d passed, %d failed, %d skipped", counts["pass"], counts["fail"], counts["skip"])
	if n := counts[claims.NotClaimed]; n > 0 {
		fmt.Printf(", %d not claimed (--mode %s)", n, *nodeMode)
	}
	fmt.Println()
}

func writeReport() error {
	if *reportPath == "" {
		return nil
	}
	rep := Report{
		Label:          *label,
		Endpoint:       *runtimeEndpoint,
		RuntimeName:    suite.version.GetRuntimeName(),
		RuntimeVersion: suite.version.GetRuntimeVersion(),
		Started:        started.UTC(),
		Results:        sortedResults(),
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(*reportPath, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write report: %w", err)
	}
	return nil
}

// underGoTest reports whether go test runs the suite (it passes
// -test.paniconexit0), where no endpoint means skip, not a usage error.
func underGoTest() bool {
	f := flag.Lookup("test.paniconexit0")
	return f != nil && f.Value.String() == "true"
}

// usage is --help: what the suite is, how to point it at a runtime, its
// own flags (go test's -test.* flags work too and are not listed).
func usage() {
	out := flag.CommandLine.Output()
	fmt.Fprint(out, `nstarget-conformance: the TARGET conformance suite of cri-nstarget. It checks what
kubectl debug --target needs from a CRI v1 runtime (NamespaceMode TARGET for the PID and IPC
namespaces), from inside the containers it makes, against any CRI endpoint: a runtime directly,
or through a proxy such as cri-nstarget. Where CRI leaves a choice (an exited target, an unknown
mode), a case accepts any of a stated set of outcomes and reports which one it saw; it fails a
container in any namespace but the target's or the pod's, and a refusal with the wrong code.

Usage:
  nstarget-conformance --runtime-endpoint ENDPOINT --test-image IMAGE [flags]

As root (it creates and removes pods on that endpoint: use a node without workloads, or a
private runtime), pointed at the runtime's CRI socket:
  containerd    --runtime-endpoint unix:///run/containerd/containerd.sock
  CRI-O         --runtime-endpoint unix:///var/run/crio/crio.sock
  cri-nstarget  --runtime-endpoint unix:///run/cri-nstarget/cri.sock   (containerd behind it)
The image needs sh, ps, readlink, sleep, unshare and cat, as busybox has; it is pulled through
the endpoint when missing. For example:
  nstarget-conformance --runtime-endpoint unix:///run/cri-nstarget/cri.sock \
    --test-image docker.io/library/busybox:1.37 --report target.json

Flags:
`)
	flag.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, "test.") {
			return
		}
		name, text := flag.UnquoteUsage(f)
		head := "  --" + f.Name
		if name != "" {
			head += " " + name
		}
		if f.DefValue != "" && f.DefValue != "false" {
			text += " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(out, "%s\n    \t%s\n", head, text)
	})
	fmt.Fprint(out, `
Output: a line per case (PASS, FAIL or SKIP, and what the runtime did), then the counts; -test.v
prints each step as it happens. Exit status: 0 when no case failed, 1 when one did, 2 when the
suite could not run (no endpoint, the image unavailable, a bad flag).
More: man 8 nstarget-conformance; qualify.md in /usr/share/doc/cri-nstarget-conformance.
`)
}
