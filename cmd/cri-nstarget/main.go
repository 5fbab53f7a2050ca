// Command cri-nstarget is a CRI v1 proxy in front of containerd that makes
// NamespaceMode TARGET (kubectl debug --target) join the target container's
// PID and IPC namespaces. See README.md.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/coreos/go-systemd/v22/daemon"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"

	conf "github.com/cri-nstarget/cri-nstarget/config"
	"github.com/cri-nstarget/cri-nstarget/preflight"
	"github.com/cri-nstarget/cri-nstarget/server"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "config" {
		os.Exit(configCommand(os.Args[2:], os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "check" {
		os.Exit(checkCommand(context.Background(), os.Args[2:], os.Stdout, os.Stderr, preflight.NodeProbe))
	}
	cfg, showVersion, err := parseFlags(os.Args[1:], os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		return // -h, --help: the usage is written; asking for it is no error
	}
	if err != nil {
		os.Exit(2)
	}
	if showVersion {
		fmt.Println(currentBuild())
		return
	}
	log, err := newLogger(cfg.LogLevel, cfg.LogFormat, cfg.LogJournal)
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

// parseFlags reads the configuration file (--config) and the flags, which
// override it (package config). --version works whatever the file holds.
func parseFlags(args []string, out io.Writer) (conf.Config, bool, error) {
	showVersion := false
	c, err := conf.Parse(args, out, ownFlags(&showVersion))
	if err != nil {
		if showVersion && !conf.IsUsage(err) {
			return conf.Config{}, true, nil
		}
		if !conf.IsUsage(err) {
			fmt.Fprintln(out, "cri-nstarget:", err)
		}
		return conf.Config{}, false, err
	}
	return c, showVersion, nil
}

// ownFlags defines the flags of the binary that are no setting of package
// config (the reference in docs/operations.md and the man page lists them too).
func ownFlags(showVersion *bool) func(*flag.FlagSet) {
	return func(fs *flag.FlagSet) {
		fs.BoolVar(showVersion, "version", false, "print the version, the commit and the build date (the commit's), and exit")
	}
}

// reconcileTimeout bounds the start-up reconciliation that serving waits
// for: a containerd that accepts connections but does not answer must not
// keep the CRI socket from serving.
const reconcileTimeout = 10 * time.Second

// nriWaitTimeout bounds the wait at start-up for the first answer of
// containerd's NRI (registration takes milliseconds when it is there).
const nriWaitTimeout = 5 * time.Second

// run serves until ctx is done, then stops gracefully within the shutdown
// timeout and removes its socket. In the plugin mode it serves no CRI: it
// answers containerd's NRI events until ctx is done.
func run(ctx context.Context, cfg conf.Config, log *logrus.Entry) error {
	if err := os.MkdirAll(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	if err := os.Chmod(cfg.StateDir, 0o700); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	backend, ctrdConn, closeConns, err := dialBackend(cfg)
	if err != nil {
		return err
	}
	defer closeConns()
	mx, err := listenMetrics(cfg.MetricsAddress, cfg.Mode)
	if err != nil {
		return err
	}
	defer mx.close()
	ev := newEvents(cfg, log, mx)
	srv := server.New(server.Options{
		Backend:             backend,
		Containerd:          ctrdConn,
		ContainerdNamespace: cfg.ContainerdNamespace,
		StateDir:            cfg.StateDir,
		Strict:              cfg.StrictTargeting,
		Log:                 log,
		Metrics:             mx.recorder(),
		TargetingVia:        cfg.TargetingVia,
		NRISocket:           cfg.NRISocket,
		Events:              ev.sink(),
		HandlersWithoutJoin: cfg.NoJoinHandlers,
		Mode:                cfg.Mode,
		Refused:             ev.pluginRefused,
	})
	mx.serve(srv, log)
	if cfg.Mode == server.ModePlugin {
		err = runPlugin(ctx, cfg, srv, ev, log)
	} else {
		err = serveCRI(ctx, cfg, srv, log)
	}
	if err != nil {
		return err
	}
	log.Info("shutting down")
	sdNotify(log, daemon.SdNotifyStopping)
	sctx, cancel := context.WithTimeout(context.Background(), time.Duration(cfg.ShutdownTimeout))
	defer cancel()
	srv.Shutdown(sctx)
	ev.close(sctx) // what is queued, while the same shutdown_timeout lasts
	return nil
}

// serveCRI is the proxy: it serves the CRI socket until ctx is done, and
// removes the socket after.
func serveCRI(ctx context.Context, cfg conf.Config, srv *server.Server, log *logrus.Entry) error {
	lis, path, err := server.Listen(cfg.Listen, cfg.SocketGroup)
	if err != nil {
		return err
	}
	defer os.Remove(path)

	via, why := prepareToServe(ctx, srv, log)
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(lis) }()
	go srv.WatchBackend(ctx, 5*time.Second) // grpc.health.v1 on the CRI socket
	log.WithFields(logrus.Fields{"listen": path, "backend": cfg.RuntimeEndpoint, "containerd": cfg.ContainerdAddress,
		"strict": cfg.StrictTargeting, "version": currentBuild().Version, "via": via, "via_why": why}).Info("serving CRI")
	sdNotify(log, daemon.SdNotifyReady) // Type=notify: kubelet may start now
	select {
	case err := <-serveErr:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	return nil
}

// runPlugin is the plugin mode: the server's NRI plugin answers
// containerd's events (it connects, and connects again, by itself) until
// ctx is done. What a crash left is reconciled at start-up, and again at
// each NRI synchronization. When its first attempt finds no usable NRI, a
// Warning on the node says so, once.
func runPlugin(ctx context.Context, cfg conf.Config, srv *server.Server, ev *podEvents, log *logrus.Entry) error {
	via, why := prepareToServe(ctx, srv, log)
	if e, ok := pluginUnsupported(via, why); ok {
		log.WithField("why", why).Warn("the plugin cannot work on this node: not ready on /healthz, it does nothing (it tries containerd's NRI again, unless it cannot pin)")
		ev.postNode(e)
	}
	log.WithFields(logrus.Fields{"nri": cfg.NRISocket, "containerd": cfg.ContainerdAddress, "strict": cfg.StrictTargeting,
		"version": currentBuild().Version, "via": via, "via_why": why}).Info("running as an NRI plugin of containerd (mode plugin): no CRI socket")
	sdNotify(log, daemon.SdNotifyReady)
	<-ctx.Done()
	return nil
}

// dialBackend dials the backend's CRI and containerd's own API. containerd
// serves both on one socket: one connection then carries both, so that once
// a CRI call has found containerd back after a restart, the target's lookup
// does too (a second connection could still be waiting out its reconnect
// backoff, and the create would fall back for nothing).
func dialBackend(cfg conf.Config) (backend, ctrd *grpc.ClientConn, closeAll func(), err error) {
	backend, err = dial(cfg.RuntimeEndpoint,
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(server.MaxMsgSize), grpc.MaxCallSendMsgSize(server.MaxMsgSize)))
	if err != nil {
		return nil, nil, nil, fmt.Errorf("backend: %w", err)
	}
	if sameSocket(cfg.RuntimeEndpoint, cfg.ContainerdAddress) {
		return backend, backend, func() { backend.Close() }, nil
	}
	if ctrd, err = dial(cfg.ContainerdAddress); err != nil {
		backend.Close()
		return nil, nil, nil, fmt.Errorf("containerd: %w", err)
	}
	return backend, ctrd, func() { ctrd.Close(); backend.Close() }, nil
}

// prepareToServe runs the server (server.Run: what a crash left, unfinished
// creates and stale pins, undone before the first call is served when
// containerd answers in time, otherwise retried in the background until it
// does; then the server's goroutines, the NRI connection last), and gives
// NRI a moment to answer, so that the first creates served take the path
// the backend offers (its registration is quick when it is there). It
// returns that path, and why.
func prepareToServe(ctx context.Context, srv *server.Server, log *logrus.Entry) (string, string) {
	rctx, rcancel := context.WithTimeout(ctx, reconcileTimeout)
	if err := srv.Run(rctx); err != nil {
		log.WithError(err).Warn("reconcile at start-up; retrying in the background until the backend answers")
	}
	rcancel()
	wctx, wcancel := context.WithTimeout(ctx, nriWaitTimeout)
	srv.WaitTargetingPath(wctx)
	wcancel()
	return srv.TargetingPath()
}

// sdNotify tells systemd (Type=notify) about the service's state; without
// NOTIFY_SOCKET it does nothing.
func sdNotify(log *logrus.Entry, state string) {
	if _, err := daemon.SdNotify(false, state); err != nil {
		log.WithError(err).Warn("sd_notify " + state)
	}
}
