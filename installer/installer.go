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
	// EventsKubeconfig, when set, is written to KubeconfigPath, and a
	// config this installer writes names it as events_kubeconfig: the
	// shim's Events go out under an identity of their own.
	EventsKubeconfig []byte
	// KubeletUnit and ContainerdUnit: default kubelet.service and
	// containerd.service.
	KubeletUnit    string
	ContainerdUnit string
	// HealthTimeout bounds the wait for the shim's health once its unit
	// was started (default 2m); ReadyTimeout the wait for the node to be
	// Ready after a kubelet restart (default 5m).
	HealthTimeout time.Duration
	ReadyTimeout  time.Duration
	// Poll is how often those waits look; default 1s.
	Poll time.Duration

	Systemd Systemd
	Cluster Cluster
	CRI     CRI
	Mounts  Mounts
	Slots   Slots
	Log     logrus.FieldLogger
}

// Installer installs, upgrades and removes cri-nstarget on one node.
type Installer struct {
	o       Options
	shimSHA string
	unit    []byte // the unit file, rendered
	// held is the restart slot while this installer holds one.
	held *slots.Held
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
	if o.ReadyTimeout <= 0 {
		o.ReadyTimeout = 5 * time.Minute
	}
	if o.Poll <= 0 {
		o.Poll = time.Second
	}
	in := &Installer{o: o, shimSHA: sha(o.Shim)}
	in.unit = renderUnit(o.UnitTemplate, o.BinDir)
	return in, nil
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

// save writes st to the host, then passes the point "state:PHASE".
func (in *Installer) save(st State) error {
	if err := saveState(in.o.Root, st); err != nil {
		return err
	}
	return in.at("state:" + string(st.Phase))
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
// Waiting for it follows ctx.
func (in *Installer) slot(ctx context.Context) error {
	if in.held != nil {
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

// waitFor calls check every Poll until it succeeds or deadline passes, and
// returns its last error.
func (in *Installer) waitFor(ctx context.Context, deadline time.Time, check func(context.Context) error) error {
	for {
		err := check(ctx)
		if err == nil {
			return nil
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
