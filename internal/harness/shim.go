package harness

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BuildShim compiles cmd/cri-nstarget into dir and returns the binary's path.
// moduleRoot is the repository root (where go.mod is). It builds as the
// Makefile does (ShimTags); with more tags (e.g. "failpoints"), the binary
// is named after them.
func BuildShim(moduleRoot, dir string, tags ...string) (string, error) {
	bin := filepath.Join(dir, "cri-nstarget")
	if len(tags) > 0 {
		bin += "-" + strings.Join(tags, "-")
	}
	args := []string{"build", "-tags", strings.Join(append([]string{ShimTags}, tags...), ","), "-o", bin}
	cmd := exec.Command("go", append(args, "./cmd/cri-nstarget")...)
	cmd.Dir = moduleRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build cri-nstarget: %w\n%s", err, out)
	}
	return bin, nil
}

// hasFlag tells whether the cri-nstarget binary has the flag --name, from
// its usage.
func hasFlag(binary, name string) bool {
	out, _ := exec.Command(binary, "-h").CombinedOutput()
	return strings.Contains(string(out), "\n  -"+name+" ")
}

// ShimTags are the build tags the Makefile builds the shim with (SHIM_TAGS).
const ShimTags = "grpcnotrace"

// BuildNojoinRuntime builds internal/nojoinruntime, the tests' stand-in for
// a sandboxed runtime (runc behind a wrapper that drops the PID namespace
// path), into dir, running runc (default $NSTARGET_RUNC, else the runc on
// PATH, as containerd's), and returns its path.
func BuildNojoinRuntime(moduleRoot, dir, runc string) (string, error) {
	runc, err := exec.LookPath(cmp.Or(runc, os.Getenv("NSTARGET_RUNC"), "runc"))
	if err != nil {
		return "", fmt.Errorf("build nojoinruntime: %w", err)
	}
	if runc, err = filepath.Abs(runc); err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "nojoinruntime")
	cmd := exec.Command("go", "build", "-ldflags", "-X main.runc="+runc, "-o", bin, "./internal/nojoinruntime")
	cmd.Dir = moduleRoot
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build nojoinruntime: %w\n%s", err, out)
	}
	return bin, nil
}

// BuildIPCProbe builds internal/ipcprobe, statically, into dir and returns
// it as an image file, bin/ipcprobe.
func BuildIPCProbe(moduleRoot, dir string) (File, error) {
	bin := filepath.Join(dir, "ipcprobe")
	cmd := exec.Command("go", "build", "-o", bin, "./internal/ipcprobe")
	cmd.Dir = moduleRoot
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return File{}, fmt.Errorf("build ipcprobe: %w\n%s", err, out)
	}
	b, err := os.ReadFile(bin)
	if err != nil {
		return File{}, err
	}
	return File{Name: "bin/ipcprobe", Mode: 0o755, Data: b}, nil
}

// Shim is a cri-nstarget process in front of a containerd.
type Shim struct {
	Binary  string
	Dir     string // holds the socket, the state dir and the log
	Args    []string
	cmd     *exec.Cmd
	log     *os.File
	exited  chan struct{}
	Conn    *grpc.ClientConn
	Runtime runtime.RuntimeServiceClient
	Images  runtime.ImageServiceClient
	// Plugin: the plugin mode (StartPlugin), which serves no CRI: Conn,
	// Runtime and Images are nil, and it is ready once containerd has
	// synchronized it.
	Plugin bool
	// health is the plugin mode's /healthz (its --metrics-address), by
	// which StartPlugin knows it connected, whatever its log level.
	health string
	// unready: the plugin mode expected not to become ready (its /healthz
	// answering at all is enough to start it: StartPluginUnready).
	unready bool
	// Wrap, if set, is the command that runs Binary and Args (its program
	// and arguments before them: unshare's, say), and execs it: the pid is
	// the shim's.
	Wrap []string
}

// Socket is the shim's CRI socket.
func (s *Shim) Socket() string { return filepath.Join(s.Dir, "cri.sock") }

// Endpoint is the shim's CRI endpoint, "unix://" + Socket().
func (s *Shim) Endpoint() string { return "unix://" + s.Socket() }

// StateDir is the shim's --state-dir: Dir itself, as in production, where
// the socket sits beside the pins (Dir/pins).
func (s *Shim) StateDir() string { return s.Dir }

// LogPath is where the shim's output goes.
func (s *Shim) LogPath() string { return filepath.Join(s.Dir, "shim.log") }

// metricsAddrRE matches the line a shim logs when its metrics endpoint
// serves, with the address it bound.
var metricsAddrRE = regexp.MustCompile(`msg="serving metrics" address="?([0-9.:\[\]]+)"?`)

// MetricsAddr is the address of the metrics endpoint the shim logging to
// logPath serves, from the last "serving metrics" line (a shim started with
// --metrics-address 127.0.0.1:0 logs the port it bound, at each start), or
// "" before there is one.
func MetricsAddr(logPath string) string {
	b, _ := os.ReadFile(logPath)
	m := metricsAddrRE.FindAllSubmatch(b, -1)
	if len(m) == 0 {
		return ""
	}
	return string(m[len(m)-1][1])
}

// StartShim starts binary in front of c with its socket, state dir and log in
// dir, plus extra flags, and waits until it serves.
func StartShim(ctx context.Context, binary, dir string, c *Containerd, extra ...string) (*Shim, error) {
	s := &Shim{Binary: binary, Dir: dir}
	s.Args = append(append([]string{
		"--config=", // this machine's /etc/cri-nstarget/config.toml is not the test's
		"--listen", s.Endpoint(),
	}, s.backendArgs(c)...), extra...)
	if hasFlag(binary, "events-kubeconfig") {
		// nor is its kubelet's kubeconfig: no Events unless a test asks
		// (a later flag in extra wins); an older binary (a benchmark's
		// baseline) has no such flag, and no events
		s.Args = append(s.Args[:1:1], append([]string{"--events-kubeconfig="}, s.Args[1:]...)...)
	}
	conn, err := Dial(s.Endpoint(), grpc.WithConnectParams(grpc.ConnectParams{
		Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, MaxDelay: 500 * time.Millisecond},
		MinConnectTimeout: time.Second,
	}))
	if err != nil {
		return nil, err
	}
	s.Conn, s.Runtime, s.Images = conn, runtime.NewRuntimeServiceClient(conn), runtime.NewImageServiceClient(conn)
	if err := s.Start(ctx); err != nil {
		conn.Close()
		return nil, err
	}
	return s, nil
}

// StartPlugin starts binary in the plugin mode (--mode plugin) beside c,
// with its state dir and log in dir, plus extra flags: no CRI socket, an
// NRI plugin of c. It returns once c has synchronized the plugin.
func StartPlugin(ctx context.Context, binary, dir string, c *Containerd, extra ...string) (*Shim, error) {
	return StartPluginWrapped(ctx, nil, binary, dir, c, extra...)
}

// StartPluginWrapped is StartPlugin with binary run by wrap (Shim.Wrap):
// unshare --mount --propagation private, for one in a mount namespace of
// its own, as in its pod.
func StartPluginWrapped(ctx context.Context, wrap []string, binary, dir string, c *Containerd, extra ...string) (*Shim, error) {
	return startPlugin(ctx, false, wrap, binary, dir, c, extra...)
}

// StartPluginUnready is StartPluginWrapped for a plugin expected never to
// be ready: it is started once its /healthz answers, whatever it says.
func StartPluginUnready(ctx context.Context, wrap []string, binary, dir string, c *Containerd, extra ...string) (*Shim, error) {
	return startPlugin(ctx, true, wrap, binary, dir, c, extra...)
}

func startPlugin(ctx context.Context, unready bool, wrap []string, binary, dir string, c *Containerd, extra ...string) (*Shim, error) {
	addr, err := freeAddress()
	if err != nil {
		return nil, err
	}
	s := &Shim{Binary: binary, Dir: dir, Plugin: true, unready: unready, Wrap: wrap, health: "http://" + addr + "/healthz"}
	s.Args = append(append([]string{"--config=", "--events-kubeconfig=", "--mode", "plugin"}, s.backendArgs(c)...), withMetricsAddress(extra, addr)...)
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// backendArgs are the flags that put s in front of c, with its state in
// s.Dir and a debug log: the proxy's and the plugin mode's alike.
func (s *Shim) backendArgs(c *Containerd) []string {
	return []string{
		"--runtime-endpoint", c.Endpoint(),
		"--containerd-address", c.Address(),
		"--state-dir", s.StateDir(),
		"--nri-socket", c.NRISocket(),
		"--log-level", "debug",
	}
}

// pluginSynced is what the plugin mode logs at each NRI synchronization.
const pluginSynced = `msg="NRI plugin synchronized"`

// Syncs counts the NRI synchronizations the plugin logged.
func (s *Shim) Syncs() int {
	b, _ := os.ReadFile(s.LogPath())
	return strings.Count(string(b), pluginSynced)
}

// ready tells whether the shim serves: its CRI answers, or, in the plugin
// mode, its /healthz says it is connected to containerd's NRI (whatever
// its log level; containerd's creates then wait for its synchronization).
func (s *Shim) ready(ctx context.Context) error {
	if s.Plugin {
		return healthy(ctx, s.health, s.unready)
	}
	vctx, vcancel := context.WithTimeout(ctx, time.Second)
	defer vcancel()
	_, err := s.Runtime.Version(vctx, &runtime.VersionRequest{})
	return err
}

// Start (re)starts the shim process with the same arguments.
func (s *Shim) Start(ctx context.Context) error {
	if err := os.MkdirAll(s.Dir, 0o700); err != nil {
		return fmt.Errorf("shim dir: %w", err)
	}
	log, err := os.OpenFile(s.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("shim log: %w", err)
	}
	argv := append(append(slices.Clone(s.Wrap), s.Binary), s.Args...)
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("start cri-nstarget: %w", err)
	}
	s.cmd, s.log, s.exited = cmd, log, make(chan struct{})
	go func() { cmd.Wait(); close(s.exited) }()

	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	for {
		err := s.ready(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("cri-nstarget exited at start-up: %s", tail(s.LogPath()))
		case <-ctx.Done():
			s.Kill()
			return fmt.Errorf("cri-nstarget not serving: %v; log: %s", err, tail(s.LogPath()))
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// PID is the running shim's pid.
func (s *Shim) PID() int { return s.cmd.Process.Pid }

// Stop sends SIGTERM by pid and waits for the process to exit (SIGKILL after
// 15 s). It reports an exit other than a clean one.
func (s *Shim) Stop() error {
	if s.cmd == nil {
		return nil
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(15 * time.Second):
		s.Kill()
		return errors.New("cri-nstarget did not stop within 15s of SIGTERM")
	}
	defer s.release()
	if st := s.cmd.ProcessState; st != nil && !st.Success() {
		return fmt.Errorf("cri-nstarget exited with %v", st)
	}
	return nil
}

// Kill sends SIGKILL by pid and waits for the process to be gone.
func (s *Shim) Kill() {
	if s.cmd == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	s.release()
}

// Quit sends SIGQUIT by pid: the Go runtime writes every goroutine's
// stack to the shim's log and exits. It returns what the log gained, the
// dump, for a test that counted a goroutine too many. The shim is gone
// after it (Close then has nothing to stop).
func (s *Shim) Quit() string {
	if s.cmd == nil {
		return ""
	}
	var from int64
	if fi, err := os.Stat(s.LogPath()); err == nil {
		from = fi.Size()
	}
	s.cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-s.exited:
		s.release()
	case <-time.After(15 * time.Second):
		s.Kill()
	}
	b, _ := os.ReadFile(s.LogPath())
	return string(b[min(from, int64(len(b))):])
}

func (s *Shim) release() {
	s.log.Close()
	s.cmd = nil
}

// Close stops the shim and closes the client connection. The shim's dir is
// left for the caller (its pins may outlive the process on purpose).
func (s *Shim) Close() error {
	err := s.Stop()
	if s.Conn != nil {
		s.Conn.Close()
	}
	return err
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// withMetricsAddress is args with --metrics-address addr: in place of the
// one they give (whose address the log's "serving metrics" line still
// tells, MetricsAddr), else added.
func withMetricsAddress(args []string, addr string) []string {
	out := slices.Clone(args)
	for i, a := range out {
		switch {
		case a == "--metrics-address" && i+1 < len(out):
			out[i+1] = addr
			return out
		case strings.HasPrefix(a, "--metrics-address="):
			out[i] = "--metrics-address=" + addr
			return out
		}
	}
	return append(out, "--metrics-address", addr)
}

// freeAddress is a loopback host:port nothing listens on now.
func freeAddress() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("a port for the plugin's /healthz: %w", err)
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// healthy is nil once url answers 200 (anyStatus: answers at all).
func healthy(ctx context.Context, url string, anyStatus bool) error {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK && !anyStatus {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s %s", url, resp.Status, b)
	}
	return nil
}
