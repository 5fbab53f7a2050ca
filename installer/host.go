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
	// StartTimer starts t's timer, made with its service as transient
	// units; an error when a unit of either name is loaded.
	StartTimer(ctx context.Context, t Timer) error
	// ResetFailed is systemctl reset-failed; nothing for a unit not
	// loaded.
	ResetFailed(ctx context.Context, name string) error
}

// Timer is a transient timer and the oneshot service it starts, made
// through systemd's D-Bus API: nothing of it is written on the host, and
// it is gone at the next boot.
type Timer struct {
	// Name is the timer's unit, Service the service's (the same name,
	// .service).
	Name, Service string
	Description   string
	// After is when it fires, from its start.
	After time.Duration
	// Commands are the service's ExecStart, run in order: each a host
	// binary's absolute path and its arguments.
	Commands [][]string
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
	// ImageOf is the image of a running container of the pod podUID.
	ImageOf(ctx context.Context, socket, podUID string) (string, error)
	// Smoke runs command of image (present on the node) in a new pod
	// sandbox through the socket, waits for it to exit 0, and removes the
	// container and the sandbox.
	Smoke(ctx context.Context, socket, podUID, image string, command []string) error
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
