package trial

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/installer"
	"github.com/cri-nstarget/cri-nstarget/installer/cri"
)

// fakeShimEnv makes the test binary a fake shim (TestMain): it parses the
// shim's flags, writes them to $fakeShimArgs, and serves grpc.health.v1
// SERVING and the CRI Version on --listen until SIGTERM; with "exit" it
// fails at once, with "silent" it serves nothing.
const fakeShimEnv = "CRI_NSTARGET_FAKE_SHIM"

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeShimEnv); mode != "" {
		os.Exit(fakeShim(mode))
	}
	os.Exit(m.Run())
}

type version struct {
	runtimeapi.UnimplementedRuntimeServiceServer
}

func (version) Version(context.Context, *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	return &runtimeapi.VersionResponse{RuntimeName: "containerd", RuntimeVersion: "v2.4.2"}, nil
}

func fakeShim(mode string) int {
	fs := flag.NewFlagSet("fake", flag.ContinueOnError)
	listen := fs.String("listen", "", "")
	for _, f := range []string{"config", "state-dir", "runtime-endpoint", "containerd-address", "targeting-via", "metrics-address",
		"events-kubeconfig", "socket-group", "log-journal", "shutdown-timeout"} {
		fs.String(f, "", "")
	}
	if err := fs.Parse(os.Args[1:]); err != nil {
		return 2
	}
	os.WriteFile(os.Getenv("FAKE_SHIM_ARGS"), []byte(strings.Join(os.Args[1:], "\n")), 0o600)
	if mode == "exit" {
		fmt.Fprintln(os.Stderr, "config.toml:3: listen_address: unknown key")
		return 1
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if mode == "silent" {
		<-ctx.Done()
		return 0
	}
	ln, err := net.Listen("unix", strings.TrimPrefix(*listen, "unix://"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	s := grpc.NewServer()
	healthpb.RegisterHealthServer(s, health.NewServer())
	runtimeapi.RegisterRuntimeServiceServer(s, version{})
	go s.Serve(ln)
	<-ctx.Done()
	s.Stop()
	return 0
}

// TestTrial runs the test binary as the trial's shim: a real process, a
// real socket, asked over gRPC; then stopped, its directory gone.
func TestTrial(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	spec := installer.TrialSpec{SHA256: hex.EncodeToString(sum[:]), Config: "/host/etc/cri-nstarget/config.toml",
		RuntimeEndpoint: "unix:///host/run/containerd/containerd.sock", ContainerdAddress: "/host/run/containerd/containerd.sock"}
	log := logrus.New()
	log.SetOutput(io.Discard)
	for _, tc := range []struct {
		mode, sha, want string
	}{
		{mode: "serve"},
		{mode: "exit", want: `it exited before it served: exit status 1 (its output: "config.toml:3: listen_address: unknown key")`},
		{mode: "silent", want: "it did not say SERVING"},
		{mode: "serve", sha: "0000", want: "is not the binary to install"},
	} {
		t.Run(tc.mode+tc.sha, func(t *testing.T) {
			dir, argsFile := t.TempDir(), filepath.Join(t.TempDir(), "args")
			t.Setenv(fakeShimEnv, tc.mode)
			t.Setenv("FAKE_SHIM_ARGS", argsFile)
			r := Runner{Binary: self, Dir: dir, CRI: cri.Client{Timeout: time.Second}, Poll: 20 * time.Millisecond, Log: log}
			s := spec
			if tc.sha != "" {
				s.SHA256 = tc.sha
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			err := r.Trial(ctx, s)
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("Trial: %v, want %q", err, tc.want)
			}
			if left, _ := os.ReadDir(dir); len(left) != 0 {
				t.Errorf("left in the trials' dir: %v", left)
			}
			if tc.sha != "" {
				return
			}
			args, _ := os.ReadFile(argsFile)
			for _, a := range []string{"--config\n" + spec.Config, "--listen\nunix://" + dir + "/cri-nstarget-trial-", "--state-dir\n" + dir + "/cri-nstarget-trial-",
				"--targeting-via\nupdate", "--metrics-address\n\n", "--events-kubeconfig\n\n", "--runtime-endpoint\n" + spec.RuntimeEndpoint} {
				if !strings.Contains(string(args), a) {
					t.Errorf("the trial's args lack %q:\n%s", a, args)
				}
			}
			if strings.Contains(string(args), "/run/cri-nstarget") {
				t.Errorf("the trial's args name the serving shim's paths:\n%s", args)
			}
		})
	}
}
