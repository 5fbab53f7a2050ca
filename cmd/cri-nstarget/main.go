// Command cri-nstarget is a CRI v1 proxy in front of containerd that makes
// NamespaceMode TARGET (kubectl debug --target) join the target container's
// PID and IPC namespaces. See README.md.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/containerd/containerd"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"

	"github.com/cri-nstarget/cri-nstarget/server"
)

// version is set at build time (-ldflags "-X main.version=...").
var version = "dev"

type config struct {
	listen              string
	runtimeEndpoint     string
	containerdAddress   string
	containerdNamespace string
	stateDir            string
	strict              bool
	logLevel            string
	logFormat           string
	shutdownTimeout     time.Duration
}

func main() {
	cfg, showVersion, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(2)
	}
	if showVersion {
		fmt.Printf("cri-nstarget %s (CRI v1, %s %s/%s)\n", version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return
	}
	log, err := newLogger(cfg.logLevel, cfg.logFormat)
	if err != nil {
		fmt.Fprintln(os.Stderr, "cri-nstarget:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, log); err != nil {
		log.WithError(err).Error("cri-nstarget stopped")
		os.Exit(1)
	}
}

func parseFlags(args []string, out io.Writer) (config, bool, error) {
	var cfg config
	fs := flag.NewFlagSet("cri-nstarget", flag.ContinueOnError)
	fs.SetOutput(out)
	fs.StringVar(&cfg.listen, "listen", "unix:///run/cri-nstarget/cri.sock", "CRI socket to serve (kubelet's --container-runtime-endpoint)")
	fs.StringVar(&cfg.runtimeEndpoint, "runtime-endpoint", "unix:///run/containerd/containerd.sock", "backend CRI endpoint")
	fs.StringVar(&cfg.containerdAddress, "containerd-address", "/run/containerd/containerd.sock", "containerd API socket (for container specs and task pids)")
	fs.StringVar(&cfg.containerdNamespace, "containerd-namespace", "k8s.io", "containerd namespace of CRI objects")
	fs.StringVar(&cfg.stateDir, "state-dir", "/run/cri-nstarget", "state directory (namespace pins); should be on tmpfs")
	fs.BoolVar(&cfg.strict, "strict-targeting", false, "fail CreateContainer/StartContainer instead of falling back to the pod's namespaces")
	fs.StringVar(&cfg.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.StringVar(&cfg.logFormat, "log-format", "text", "log format: text or json")
	fs.DurationVar(&cfg.shutdownTimeout, "shutdown-timeout", 10*time.Second, "how long in-flight calls may run after SIGTERM")
	showVersion := fs.Bool("version", false, "print the version and exit")
	if err := fs.Parse(args); err != nil {
		return cfg, false, err
	}
	if fs.NArg() > 0 {
		err := fmt.Errorf("unexpected arguments: %v", fs.Args())
		fmt.Fprintln(out, "cri-nstarget:", err)
		return cfg, false, err
	}
	return cfg, *showVersion, nil
}

func newLogger(level, format string) (*logrus.Entry, error) {
	l := logrus.New()
	lvl, err := logrus.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	l.SetLevel(lvl)
	switch format {
	case "text":
		l.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	case "json":
		l.SetFormatter(&logrus.JSONFormatter{})
	default:
		return nil, fmt.Errorf("--log-format %q: want text or json", format)
	}
	return logrus.NewEntry(l), nil
}

// run serves until ctx is done, then stops gracefully within the shutdown
// timeout and removes its socket.
func run(ctx context.Context, cfg config, log *logrus.Entry) error {
	if err := os.MkdirAll(cfg.stateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if err := os.Chmod(cfg.stateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	backend, err := dial(cfg.runtimeEndpoint,
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(server.MaxMsgSize), grpc.MaxCallSendMsgSize(server.MaxMsgSize)))
	if err != nil {
		return fmt.Errorf("backend: %w", err)
	}
	defer backend.Close()
	ctrdConn, err := dial(cfg.containerdAddress)
	if err != nil {
		return fmt.Errorf("containerd: %w", err)
	}
	defer ctrdConn.Close()
	ctrd, err := containerd.NewWithConn(ctrdConn)
	if err != nil {
		return fmt.Errorf("containerd %s: %w", cfg.containerdAddress, err)
	}
	srv := server.New(server.Options{
		Backend:             backend,
		Containerd:          ctrd,
		ContainerdNamespace: cfg.containerdNamespace,
		StateDir:            cfg.stateDir,
		Strict:              cfg.strict,
		Log:                 log,
	})
	lis, path, err := listen(cfg.listen)
	if err != nil {
		return err
	}
	defer os.Remove(path)

	go releaseStale(ctx, srv, log)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	log.WithFields(logrus.Fields{"listen": path, "backend": cfg.runtimeEndpoint, "containerd": cfg.containerdAddress,
		"strict": cfg.strict, "version": version}).Info("serving CRI")
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down")
	sctx, cancel := context.WithTimeout(context.Background(), cfg.shutdownTimeout)
	defer cancel()
	srv.Shutdown(sctx)
	return nil
}

// listen opens the CRI socket, mode 0660. A socket file left by a crashed
// predecessor is replaced; a socket someone still serves on is an error.
func listen(endpoint string) (net.Listener, string, error) {
	path := strings.TrimPrefix(endpoint, "unix://")
	if !filepath.IsAbs(path) {
		return nil, "", fmt.Errorf("--listen %q: want unix:///absolute/path", endpoint)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, "", fmt.Errorf("listen %s: %w", path, err)
	}
	if fi, err := os.Lstat(path); err == nil {
		if fi.Mode()&os.ModeSocket == 0 {
			return nil, "", fmt.Errorf("listen %s: exists and is not a socket", path)
		}
		if c, err := net.DialTimeout("unix", path, time.Second); err == nil {
			c.Close()
			return nil, "", fmt.Errorf("listen %s: another process serves this socket", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, "", fmt.Errorf("listen %s: remove stale socket: %w", path, err)
		}
	}
	old := syscall.Umask(0o117)
	lis, err := net.Listen("unix", path)
	syscall.Umask(old)
	if err != nil {
		return nil, "", fmt.Errorf("listen %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o660); err != nil {
		lis.Close()
		return nil, "", fmt.Errorf("listen %s: %w", path, err)
	}
	return lis, path, nil
}

// releaseStale retries the start-up release of stale pins until the backend
// answers once.
func releaseStale(ctx context.Context, srv *server.Server, log *logrus.Entry) {
	for attempt := 0; ; attempt++ {
		err := srv.ReleaseStale(ctx)
		if err == nil {
			return
		}
		if attempt == 0 {
			log.WithError(err).Warn("release stale pins; retrying until the backend answers")
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(2 * time.Second):
		}
	}
}
