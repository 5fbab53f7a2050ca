package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

const (
	defaultStartTimeout = 30 * time.Second
	stopTimeout         = 10 * time.Second
	logTailBytes        = 4096
)

// Options configure StartContainerd.
type Options struct {
	// Dir holds everything containerd writes; it must be short (unix socket
	// paths are limited to ~108 bytes), e.g. TempDir("nst-"). It is made
	// mode DirMode, and every directory above it must be traversable by
	// others (see DirMode). Stop removes it.
	Dir string
	// RegistryHost ("127.0.0.1:PORT") is mirrored to http://RegistryHost.
	RegistryHost string
	// SandboxImage is the full reference of the CRI sandbox (pause) image.
	SandboxImage string
	// Binary is the containerd executable; default $NSTARGET_CONTAINERD,
	// else "containerd". A containerd-shim-runc-v2 beside it is the runc
	// shim (runtime_path), whatever the config version.
	Binary string
	// ConfigVersion is the config schema: 2 (containerd 1.6, 1.7), 3
	// (containerd 2.0-2.3) or 4 (containerd 2.4 and later); default
	// $NSTARGET_CONTAINERD_CONFIG_VERSION, else what `Binary --version` says.
	ConfigVersion int
	// Runc is the runc binary the runc shim runs (the runtime's BinaryName)
	// and Stop force-deletes leftovers with; default $NSTARGET_RUNC, else the
	// runc on containerd's PATH.
	Runc string
	// RegistryAliases are registry hosts (e.g. "registry.k8s.io") whose
	// pulls go to http://RegistryHost, through hosts.toml files under
	// Dir/certs.d (config_path) instead of a mirror entry.
	RegistryAliases []string
	// CNIConfList, if set, is the CNI network of pods that are not on the
	// host network (see Bridge); it is written to Dir/cni.
	CNIConfList string
	// NRIValidator, for containerd 2.x, is TOML for NRI's default
	// validator (e.g. "enable = true\nreject_namespace_adjustment = true").
	NRIValidator string
	// cniBinDir: containerd (2.0) reads the CNI plugins' directory from
	// bin_dir, not bin_dirs; set by StartContainerd from `Binary --version`.
	cniBinDir bool
	// Runtimes are runtime handlers besides runc.
	Runtimes []Runtime
	// LogWriter also receives containerd's stdout and stderr, which always
	// go to Dir/containerd.log.
	LogWriter io.Writer
	// StartTimeout bounds the wait for CRI to answer; default 30s.
	StartTimeout time.Duration
}

// Runtime is a runtime handler of containerd's CRI besides runc: always
// run by the runc shim beside containerd (runtime_path), whatever its type
// says, with BinaryName as its runc when set (e.g. BuildNojoinRuntime's
// wrapper). Type is what containerd's config (and its Status) says the
// runtime is; default runc's.
type Runtime struct {
	Name, Type, BinaryName string
}

// Containerd is a private containerd process; see StartContainerd.
type Containerd struct {
	// Dir holds containerd's config, root, state, sockets and log.
	Dir string

	opts       Options
	configPath string
	hostLock   *os.File // shared residue lock, see lockHost

	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{} // closed when cmd has been waited for
	log     *os.File
	stopped bool
	stopErr error
}

// resolveOptions fills opts' defaults as StartContainerd uses them: the
// binary, the config version and CNI directory its version reads, runc's
// absolute path, the start timeout and the absolute directory.
func resolveOptions(opts Options) (Options, error) {
	if opts.Binary == "" {
		opts.Binary = cmp.Or(os.Getenv("NSTARGET_CONTAINERD"), "containerd")
	}
	if opts.ConfigVersion == 0 {
		if v := os.Getenv("NSTARGET_CONTAINERD_CONFIG_VERSION"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				return opts, fmt.Errorf("NSTARGET_CONTAINERD_CONFIG_VERSION=%q: %w", v, err)
			}
			opts.ConfigVersion = n
		} else {
			n, err := configVersionOf(opts.Binary)
			if err != nil {
				return opts, err
			}
			opts.ConfigVersion = n
		}
	}
	if opts.ConfigVersion == 3 {
		out, err := exec.Command(opts.Binary, "--version").Output()
		if err != nil {
			return opts, fmt.Errorf("%s --version: %w", opts.Binary, err)
		}
		opts.cniBinDir = readsCNIBinDir(string(out))
	}
	if opts.Runc == "" {
		opts.Runc = os.Getenv("NSTARGET_RUNC")
	}
	if opts.Runc != "" {
		p, err := exec.LookPath(opts.Runc)
		if err != nil {
			return opts, fmt.Errorf("runc binary: %w", err)
		}
		if opts.Runc, err = filepath.Abs(p); err != nil {
			return opts, fmt.Errorf("runc binary %q: %w", p, err)
		}
	}
	if opts.StartTimeout == 0 {
		opts.StartTimeout = defaultStartTimeout
	}
	if opts.Dir == "" {
		return opts, errors.New("containerd dir: empty; need a short directory such as harness.TempDir(\"nst-\")")
	}
	dir, err := filepath.Abs(opts.Dir)
	if err != nil {
		return opts, fmt.Errorf("containerd dir %q: %w", opts.Dir, err)
	}
	opts.Dir = dir
	return opts, nil
}

// StartContainerd writes a config into opts.Dir, starts containerd and waits
// until its CRI service answers. On failure it stops what it started.
func StartContainerd(ctx context.Context, opts Options) (*Containerd, error) {
	opts, err := resolveOptions(opts)
	if err != nil {
		return nil, err
	}
	dir := opts.Dir
	configPath, err := writeConfigOpts(opts)
	if err != nil {
		return nil, err
	}
	if err := prepareDir(dir); err != nil {
		return nil, err
	}
	c := &Containerd{Dir: dir, opts: opts, configPath: configPath}
	if c.hostLock, err = lockHost(); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	if err := c.start(ctx); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// Address returns the path of containerd's gRPC (and CRI) socket.
func (c *Containerd) Address() string { return socketPath(c.Dir) }

// Endpoint returns the CRI endpoint, "unix://" + Address().
func (c *Containerd) Endpoint() string { return "unix://" + c.Address() }

// NRISocket is where containerd 2.x serves NRI plugins (1.6 has no NRI).
func (c *Containerd) NRISocket() string { return nriSocketPath(c.Dir) }

// LogPath returns the file holding containerd's output (gone after Stop).
func (c *Containerd) LogPath() string { return filepath.Join(c.Dir, "containerd.log") }

// PID returns the PID of the running containerd, or 0.
func (c *Containerd) PID() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil || c.cmd.Process == nil {
		return 0
	}
	return c.cmd.Process.Pid
}

// ShimPIDs returns the running shims started by this containerd.
func (c *Containerd) ShimPIDs() ([]Proc, error) {
	shims, err := findShims(c.Address())
	if err != nil {
		return nil, fmt.Errorf("find shims of %s: %w", c.Address(), err)
	}
	procs := make([]Proc, len(shims))
	for i, s := range shims {
		procs[i] = s.proc
	}
	return procs, nil
}

// start runs containerd and waits for CRI to answer Version.
func (c *Containerd) start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.stopped {
		return errors.New("start containerd: already stopped")
	}
	log, err := os.OpenFile(c.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open containerd log: %w", err)
	}
	cmd := exec.Command(c.opts.Binary, "--config", c.configPath)
	cmd.Dir = c.Dir
	cmd.Stdout, cmd.Stderr = log, log
	if c.opts.LogWriter != nil {
		w := io.MultiWriter(log, c.opts.LogWriter)
		cmd.Stdout, cmd.Stderr = w, w
		cmd.WaitDelay = time.Second // a shim must not hold the copy open
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start %s: %w", c.opts.Binary, err)
	}
	c.cmd, c.log, c.exited = cmd, log, make(chan struct{})
	go func(exited chan struct{}) { _ = cmd.Wait(); close(exited) }(c.exited)
	if err := c.waitReady(ctx); err != nil {
		return fmt.Errorf("containerd (pid %d) not ready: %w\n--- tail of %s ---\n%s", cmd.Process.Pid, err, c.LogPath(), c.logTail())
	}
	return nil
}

// waitReady polls CRI Version until it answers, containerd exits, or the
// start timeout or ctx ends. The caller holds c.mu.
func (c *Containerd) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.StartTimeout)
	defer cancel()
	// gRPC's default reconnect backoff starts at 1s: too slow for a socket
	// that appears within milliseconds.
	fast := grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, MaxDelay: 200 * time.Millisecond},
		MinConnectTimeout: time.Second,
	})
	conn, err := Dial(c.Endpoint(), fast)
	if err != nil {
		return err
	}
	defer conn.Close()
	client := runtime.NewRuntimeServiceClient(conn)
	for {
		callCtx, callCancel := context.WithTimeout(ctx, time.Second)
		_, err := client.Version(callCtx, &runtime.VersionRequest{})
		callCancel()
		if err == nil {
			return nil
		}
		select {
		case <-c.exited:
			return fmt.Errorf("containerd exited (%v) before answering CRI Version: %w", c.cmd.ProcessState, err)
		case <-ctx.Done():
			return fmt.Errorf("wait for CRI Version at %s: %w (last error: %v)", c.Endpoint(), ctx.Err(), err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// logTail returns the end of containerd's log.
func (c *Containerd) logTail() string {
	f, err := os.Open(c.LogPath())
	if err != nil {
		return fmt.Sprintf("(open log: %v)", err)
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size() > logTailBytes {
		_, _ = f.Seek(-logTailBytes, io.SeekEnd)
	}
	b, err := io.ReadAll(f)
	if err != nil {
		return fmt.Sprintf("(read log: %v)", err)
	}
	return string(b)
}

// LogTail returns the last few KiB of containerd's log (empty after Stop).
func (c *Containerd) LogTail() string { return c.logTail() }

// Restart stops containerd (SIGTERM, then SIGKILL) and starts it again with
// the same config and state. Shims and containers keep running.
func (c *Containerd) Restart(ctx context.Context) error {
	c.mu.Lock()
	err := c.stopProcess()
	c.mu.Unlock()
	if err != nil {
		return fmt.Errorf("restart containerd: %w", err)
	}
	if err := c.start(ctx); err != nil {
		return fmt.Errorf("restart containerd: %w", err)
	}
	return nil
}

// Kill sends SIGKILL to containerd and waits for it to exit, leaving shims
// and containers running; Restart or Stop afterwards. For fault tests.
func (c *Containerd) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cmd == nil {
		return nil
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill containerd %d: %w", c.cmd.Process.Pid, err)
	}
	<-c.exited
	c.closeLog()
	c.cmd = nil
	return nil
}

// stopProcess sends SIGTERM to containerd by PID, SIGKILL after
// stopTimeout, and waits for it. The caller holds c.mu.
func (c *Containerd) stopProcess() error {
	if c.cmd == nil {
		return nil
	}
	defer func() { c.closeLog(); c.cmd = nil }()
	pid := c.cmd.Process.Pid
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGTERM containerd %d: %w", pid, err)
	}
	select {
	case <-c.exited:
		return nil
	case <-time.After(stopTimeout):
	}
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("SIGKILL containerd %d: %w", pid, err)
	}
	select {
	case <-c.exited:
		return nil
	case <-time.After(stopTimeout):
		return fmt.Errorf("containerd %d still running %s after SIGKILL", pid, stopTimeout)
	}
}

func (c *Containerd) closeLog() {
	if c.log != nil {
		c.log.Close()
		c.log = nil
	}
}
