package installer

import (
	"context"
	"errors"
	"fmt"
	"path"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cri-nstarget/cri-nstarget/installer/hostfs"
	"github.com/cri-nstarget/cri-nstarget/installer/slots"
)

// Options say what to install and how to reach the host.
type Options struct {
	// Root is the host's / as the installer sees it (the pod's hostPath
	// mount, e.g. /host).
	Root string
	// Version is the shim's version, Shim its binary and UnitTemplate
	// systemd/cri-nstarget.service.in, as the image carries them.
	Version      string
	Shim         []byte
	UnitTemplate []byte
	// BinDir is where the binary goes on the host; default /usr/local/bin.
	BinDir string
	// KubeletUnit and ContainerdUnit: default kubelet.service and
	// containerd.service.
	KubeletUnit    string
	ContainerdUnit string
	// HealthTimeout bounds the wait for the shim's health once its unit
	// was started (default 2m); ReadyTimeout the wait for the node to be
	// Ready after a kubelet restart (default 90s: well under the 300s
	// after which a NotReady node's pods are evicted by default).
	HealthTimeout time.Duration
	ReadyTimeout  time.Duration
	// NotReadyGrace: the kubelet restarted onto the shim reporting the
	// node NotReady for this long ends the wait at once (default 20s).
	NotReadyGrace time.Duration
	// GuardAfter is when the host's guard, armed before each restart of
	// the kubelet onto the shim, puts the kubelet's file back and restarts
	// it unless the install disarmed it (default 2m; more than
	// ReadyTimeout).
	GuardAfter time.Duration
	// The smoke test through the shim, before the node is installed,
	// within SmokeTimeout (default 30s): a pod sandbox of its own run and
	// removed, and SmokeCommand (default: cri-nstarget-install's version)
	// run to exit 0 in a container in the sandbox of this installer's own
	// pod (PodUID: the node's kubelet kills the sandboxes of pods it does
	// not know), of SmokeImage, an image on the node, or else of the pod's
	// own (its running container as the runtime lists it). Without PodUID
	// the kubelet is not switched (Remove needs none).
	SmokeImage   string
	PodUID       string
	SmokeCommand []string
	SmokeTimeout time.Duration
	// Poll is how often those waits look; default 1s.
	Poll time.Duration

	Systemd Systemd
	Cluster Cluster
	CRI     CRI
	Mounts  Mounts
	Slots   Slots
	Log     logrus.FieldLogger
	// Trials runs an upgrade's new binary beside the shim serving, before
	// the shim is restarted onto it.
	Trials Trials
}

// Installer installs, upgrades and removes cri-nstarget on one node.
type Installer struct {
	o       Options
	shimSHA string
	unit    []byte // the unit file, rendered
	// held is the restart slot while this installer holds one.
	held *slots.Held
	// plan is this run's inspection of the node (begin, reinspect), for
	// putShim.
	plan *plan
	// crash, in tests, stops the installer where a kill would: it returns
	// errCrash at the named point when crash says so.
	crash func(point string) bool
}

// Failure is an install that did not end installed: refused, rolled back,
// an upgrade that did not take. State is the Node's label.
type Failure struct {
	State  string
	Reason string
}

func (f *Failure) Error() string { return f.State + ": " + f.Reason }

var errCrash = errors.New("killed (test)")

// New checks o and fills its defaults.
func New(o Options) (*Installer, error) {
	if o.Root == "" || len(o.Shim) == 0 || len(o.UnitTemplate) == 0 || o.Version == "" {
		return nil, errors.New("installer: Root, Version, Shim and UnitTemplate are required")
	}
	if o.Systemd == nil || o.Cluster == nil || o.CRI == nil || o.Mounts == nil || o.Slots == nil || o.Log == nil {
		return nil, errors.New("installer: Systemd, Cluster, CRI, Mounts, Slots and Log are required")
	}
	if o.Trials == nil {
		return nil, errors.New("installer: Trials is required")
	}
	if o.BinDir == "" {
		o.BinDir = "/usr/local/bin"
	}
	if !path.IsAbs(o.BinDir) {
		return nil, fmt.Errorf("installer: bin dir %q is not absolute", o.BinDir)
	}
	if o.KubeletUnit == "" {
		o.KubeletUnit = "kubelet.service"
	}
	if o.ContainerdUnit == "" {
		o.ContainerdUnit = "containerd.service"
	}
	if o.HealthTimeout <= 0 {
		o.HealthTimeout = 2 * time.Minute
	}
	if err := defaultBounds(&o); err != nil {
		return nil, err
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	in := &Installer{o: o, shimSHA: sha(o.Shim)}
	in.unit = renderUnit(o.UnitTemplate, o.BinDir)
	return in, nil
}

// defaultBounds fills the waits' bounds and the smoke test's defaults.
func defaultBounds(o *Options) error {
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 90 * time.Second
	}
	if o.NotReadyGrace <= 0 {
		o.NotReadyGrace = 20 * time.Second
	}
	if o.GuardAfter <= 0 {
		o.GuardAfter = 2 * time.Minute
	}
	if o.GuardAfter <= o.ReadyTimeout {
		return fmt.Errorf("installer: the guard's %s must be more than the ready timeout %s", o.GuardAfter, o.ReadyTimeout)
	}
	if o.SmokeTimeout <= 0 {
		o.SmokeTimeout = 30 * time.Second
	}
	if len(o.SmokeCommand) == 0 {
		o.SmokeCommand = []string{"/usr/local/bin/cri-nstarget-install", "version"}
	}
	return nil
}

// renderUnit fills systemd/cri-nstarget.service.in as `make install` does.
func renderUnit(tmpl []byte, binDir string) []byte {
	return []byte(strings.NewReplacer(
		"@BINDIR@", binDir,
		"@SYSCONFDIR@", "/etc",
		"@DOCDIR@", "/usr/local/share/doc/cri-nstarget",
	).Replace(string(tmpl)))
}

func (in *Installer) binPath() string { return path.Join(in.o.BinDir, "cri-nstarget") }

// at is a point where a kill is simulated in tests.
func (in *Installer) at(point string) error {
	if in.crash != nil && in.crash(point) {
		return fmt.Errorf("at %s: %w", point, errCrash)
	}
	return nil
}

// save writes st to the host, then passes the point "state:PHASE", the
// phase as the file names it (onDisk).
func (in *Installer) save(st State) error {
	if err := saveState(in.o.Root, st); err != nil {
		return err
	}
	phase, _ := st.Phase.onDisk()
	return in.at("state:" + string(phase))
}

// label sets the Node's state label and detail, logging a failure: the
// install does not wait on the apiserver for it.
func (in *Installer) label(ctx context.Context, state, detail string) {
	if err := in.o.Cluster.SetState(ctx, state, detail); err != nil {
		in.o.Log.WithError(err).Warn("could not label the node")
	}
}

// hostPath is a host's path as the installer sees it.
func (in *Installer) hostPath(p string) string { return hostfs.Path(in.o.Root, p) }

// socketPath is the host path of a unix:// CRI endpoint.
func socketPath(endpoint string) (string, error) {
	p := strings.TrimPrefix(endpoint, "unix://")
	if !path.IsAbs(p) || strings.Contains(endpoint, "://") && !strings.HasPrefix(endpoint, "unix://") {
		return "", fmt.Errorf("endpoint %q: want unix:///absolute/path", endpoint)
	}
	return path.Clean(p), nil
}

// slot holds a restart slot: the one this installer holds, or a new one.
// Waiting for it follows ctx. A slot held but lost (slots.Held.Lost) is
// given up, and is an error: the kubelet is not to be touched under it.
func (in *Installer) slot(ctx context.Context) error {
	if in.held != nil {
		if err := in.held.Lost(); err != nil {
			in.releaseSlot(ctx)
			return fmt.Errorf("the kubelet restart slot was lost, so the kubelet was not touched (retried when the installer starts again): %w", err)
		}
		return nil
	}
	h, err := in.o.Slots.Acquire(ctx)
	if err != nil {
		return err
	}
	in.held = h
	in.o.Log.WithField("lease", h.Name).Info("holding a kubelet restart slot")
	return nil
}

// trySlot takes this node's slot back (or a free one) if it can within
// five Polls, and goes on without one otherwise: for a kubelet restarted
// already, whose confirmation or restore never waits for a slot.
func (in *Installer) trySlot(ctx context.Context) {
	if in.held != nil {
		return
	}
	tctx, cancel := context.WithTimeout(ctx, 5*in.o.Poll)
	defer cancel()
	if err := in.slot(tctx); err != nil {
		in.o.Log.WithError(err).Info("going on without a restart slot: the kubelet was restarted already")
	}
}

// slotLost is why the slot held may be lost, or nil.
func (in *Installer) slotLost() error {
	if in.held == nil {
		return nil
	}
	return in.held.Lost()
}

func (in *Installer) releaseSlot(ctx context.Context) {
	if in.held == nil {
		return
	}
	if err := in.held.Release(ctx); err != nil {
		in.o.Log.WithError(err).Warn("could not release the kubelet restart slot (it expires by itself)")
	}
	in.held = nil
}

// Close gives up a slot still held without releasing it (it expires), as
// the process ends.
func (in *Installer) Close() {
	if in.held != nil {
		in.held.Abandon()
		in.held = nil
	}
}

// stopWait is an error of waitFor's check that ends the wait at once.
type stopWait struct{ error }

func (s stopWait) Unwrap() error { return s.error }

// waitFor calls check every Poll until it succeeds or deadline passes, and
// returns its last error; a stopWait ends it at once.
func (in *Installer) waitFor(ctx context.Context, deadline time.Time, check func(context.Context) error) error {
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		var stop stopWait
		if errors.As(err, &stop) {
			return stop.error
		}
		if !time.Now().Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-time.After(in.o.Poll):
		}
	}
}
