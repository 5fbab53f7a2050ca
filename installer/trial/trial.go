// Package trial runs an upgrade's new shim binary as a trial, in the
// installer's pod, beside the shim serving on the host: the image's binary
// (the bytes the upgrade writes, checked by their sha256), on a socket and a
// state dir of its own in a directory of the pod (Runner.Dir), against
// containerd's sockets as the pod sees them, with NRI (targeting_via
// update), metrics, Events and the socket group off. It is asked
// grpc.health.v1 SERVING and the CRI Version through its socket, then
// stopped, and its directory removed.
//
// It runs in the pod rather than as a transient unit on the host because
// that asks for less: it has the pod's capabilities, not root's on the
// host; it sees none of the serving shim's paths at their own (its socket
// and state are in the pod, its pins dir starts empty, so its start-up
// reconcile has nothing to undo and nothing of the serving shim's to
// find); it makes nothing on the host, and goes with the pod (it is killed
// when the installer dies), so a killed installer leaves no unit behind;
// and it needs no new power over systemd (a transient unit is any command
// as root on the host). What it does not show is the binary under the
// unit's own environment on the host: the restart that follows is checked
// for health as before, and the version before is put back when it fails.
package trial

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cri-nstarget/cri-nstarget/installer"
)

// CRI is what a trial asks of the trial's socket (package installer/cri).
type CRI interface {
	Serving(ctx context.Context, socket string) error
	Runtime(ctx context.Context, socket string) (name, version string, err error)
}

// Runner runs trials; it is an installer.Trials.
type Runner struct {
	// Binary is the shim's binary in the image.
	Binary string
	// Dir is where each trial gets a directory of its own (its socket and
	// state dir): the pod's, never the host's; default os.TempDir().
	Dir string
	CRI CRI
	// Poll is how often the trial's health is asked; default 250ms.
	Poll time.Duration
	Log  logrus.FieldLogger
}

// stopTimeout bounds a trial's own shutdown after SIGTERM; then SIGKILL.
const stopTimeout = 5 * time.Second

// Trial runs the binary as a trial, within ctx (see the package's doc).
func (r Runner) Trial(ctx context.Context, spec installer.TrialSpec) error {
	if err := r.verify(spec.SHA256); err != nil {
		return err
	}
	dir, err := os.MkdirTemp(r.Dir, "cri-nstarget-trial-")
	if err != nil {
		return fmt.Errorf("the trial's directory: %w", err)
	}
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "trial.sock")
	out := &tail{max: 4096}
	cmd := exec.Command(r.Binary, Args(spec, dir)...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{}
	dieWithParent(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start the trial: %w", err)
	}
	p := watch(cmd)
	defer p.stop()
	if err := r.ask(ctx, socket, p); err != nil {
		return fmt.Errorf("%w (its output: %q)", err, out.String())
	}
	return nil
}

// Args are the trial's flags: the node's config (none: "", not the
// image's default path) with everything that could reach the serving
// shim's state, or any other thing on the host, overridden.
func Args(spec installer.TrialSpec, dir string) []string {
	return []string{
		"--config", spec.Config,
		"--listen", "unix://" + filepath.Join(dir, "trial.sock"),
		"--state-dir", filepath.Join(dir, "state"),
		"--runtime-endpoint", spec.RuntimeEndpoint,
		"--containerd-address", spec.ContainerdAddress,
		"--targeting-via", "update",
		"--metrics-address", "",
		"--events-kubeconfig", "",
		"--socket-group", "",
		"--log-journal", "off",
		"--shutdown-timeout", "1s",
	}
}

// verify checks that Binary is the bytes the upgrade will write.
func (r Runner) verify(want string) error {
	b, err := os.ReadFile(r.Binary)
	if err != nil {
		return fmt.Errorf("read the trial's binary: %w", err)
	}
	s := sha256.Sum256(b)
	if got := hex.EncodeToString(s[:]); got != want {
		return fmt.Errorf("%s is not the binary to install (sha256 %s, want %s)", r.Binary, got, want)
	}
	return nil
}

// ask waits for the trial's SERVING, then asks the CRI Version through it.
func (r Runner) ask(ctx context.Context, socket string, p *proc) error {
	poll := r.Poll
	if poll <= 0 {
		poll = 250 * time.Millisecond
	}
	for {
		err := r.CRI.Serving(ctx, socket)
		if err == nil {
			break
		}
		select {
		case <-p.done:
			return fmt.Errorf("it exited before it served: %v", p.err)
		case <-ctx.Done():
			return fmt.Errorf("it did not say SERVING: %w", err)
		case <-time.After(poll):
		}
	}
	name, version, err := r.CRI.Runtime(ctx, socket)
	if err != nil {
		return fmt.Errorf("CRI Version through it: %w", err)
	}
	if name == "" {
		return errors.New("CRI Version through it: no runtime name")
	}
	r.Log.WithFields(logrus.Fields{"runtime": name, "runtime_version": version}).Info("the trial answered: SERVING, and the CRI Version through it")
	return nil
}

// proc is a started trial; done is closed once it has exited (err).
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

func watch(cmd *exec.Cmd) *proc {
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	return p
}

// stop ends the trial: SIGTERM, then SIGKILL after stopTimeout.
func (p *proc) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopTimeout):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// tail keeps the last max bytes written.
type tail struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(bytes.TrimSpace(t.b))
}
