package installer

import (
	"context"
	"time"

	"github.com/cri-nstarget/cri-nstarget/installer/kubelet"
	"github.com/cri-nstarget/cri-nstarget/installer/slots"
)

// Systemd is the host's service manager (its D-Bus API). Start, Restart and
// Stop return once systemd's job has finished, with an error unless it
// finished "done".
type Systemd interface {
	Unit(ctx context.Context, name string) (Unit, error)
	Start(ctx context.Context, name string) error
	Restart(ctx context.Context, name string) error
	Stop(ctx context.Context, name string) error
	// Enable and Disable change the unit's [Install] links.
	Enable(ctx context.Context, name string) error
	Disable(ctx context.Context, name string) error
	// Reload is daemon-reload.
	Reload(ctx context.Context) error
}

// Unit is what systemd says of a unit.
type Unit struct {
	LoadState   string // loaded, not-found, ...
	ActiveState string // active, failed, inactive, activating, ...
	MainPID     int
	Files       kubelet.Unit
}

// Cluster is this node's Node in the apiserver.
type Cluster interface {
	// Ready is the node's Ready condition and when the kubelet last
	// reported it.
	Ready(ctx context.Context) (ready bool, heartbeat time.Time, err error)
	// SetState labels the node with state (and describes it in an
	// annotation); "" removes both.
	SetState(ctx context.Context, state, detail string) error
	// Event posts an Event on the Node (Normal or Warning), best effort.
	Event(ctx context.Context, warning bool, reason, message string)
}

// CRI talks to CRI sockets, each given as its path as the installer sees
// it (under Options.Root).
type CRI interface {
	// Serving asks the socket's grpc.health.v1 service (the shim's) for
	// SERVING.
	Serving(ctx context.Context, socket string) error
	// Runtime is the runtime's name and version (CRI Version).
	Runtime(ctx context.Context, socket string) (name, version string, err error)
	// Created lists the ids of the containers in state CREATED: those
	// whose pins are still to be joined when they start.
	Created(ctx context.Context, socket string) (map[string]bool, error)
}

// Mounts are the host's mounts (its mount namespace, not the pod's).
type Mounts interface {
	// Under lists the mount points below dir.
	Under(dir string) ([]string, error)
	Unmount(path string) error
}

// Slots are the cluster's kubelet restart slots (package slots).
type Slots interface {
	Acquire(ctx context.Context) (*slots.Held, error)
}

// State labels of the Node (LabelState).
const (
	LabelState      = "cri-nstarget.io/state"
	StateInstalling = "installing"
	StateInstalled  = "installed"
	StateRolledBack = "rolled-back"
	StateRefused    = "refused"
	StateUpgradeBad = "upgrade-failed"
	StateRemoving   = "removing"
	StateFailed     = "failed"
)
