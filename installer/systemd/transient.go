package systemd

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	sdbus "github.com/coreos/go-systemd/v22/dbus"
	"github.com/godbus/dbus/v5"

	"github.com/cri-nstarget/cri-nstarget/installer"
)

// execStart is one ExecStart entry on D-Bus, (sasb): the binary, its
// argv, and whether an unclean exit is a failure (go-systemd's own type
// for it is unexported and takes one command only).
type execStart struct {
	Path             string
	Args             []string
	UncleanIsFailure bool
}

// monotonicTimer is one TimersMonotonic entry, (st): a base named as the
// unit file's setting (OnActiveSec; systemd's timer_base_table, src/core/
// timer.c: "OnActiveUSec" is refused as an invalid base) and its time in
// µs.
type monotonicTimer struct {
	Base string
	USec uint64
}

// StartTimer starts t's timer with its service as transient units, as
// systemd-run --on-active does: the service is an auxiliary unit of the
// timer's StartTransientUnit, and waits for the timer's job. The timer
// fires within a second of t.After (AccuracySec=1s; the default is a
// minute); the service is oneshot and goes once it has run, failed or not
// (CollectMode=inactive-or-failed).
func (c *Conn) StartTimer(ctx context.Context, t installer.Timer) error {
	timer, aux, err := timerUnits(t)
	if err != nil {
		return err
	}
	return job(ctx, "start", t.Name, func(ch chan<- string) (int, error) {
		return c.c.StartTransientUnitAux(ctx, t.Name, "fail", timer, aux, ch)
	})
}

// timerUnits are t's timer's properties and its service as an auxiliary
// unit.
func timerUnits(t installer.Timer) ([]sdbus.Property, []sdbus.PropertyCollection, error) {
	if len(t.Commands) == 0 || t.After <= 0 || t.Service == "" {
		return nil, nil, fmt.Errorf("timer %s: want a service, commands and a time", t.Name)
	}
	var execs []execStart
	for _, cmd := range t.Commands {
		if len(cmd) == 0 || !path.IsAbs(cmd[0]) {
			return nil, nil, fmt.Errorf("timer %s: command %q: want an absolute path", t.Name, cmd)
		}
		execs = append(execs, execStart{Path: cmd[0], Args: cmd, UncleanIsFailure: true})
	}
	timer := []sdbus.Property{
		sdbus.PropDescription(t.Description),
		{Name: "TimersMonotonic", Value: dbus.MakeVariant([]monotonicTimer{{"OnActiveSec", uint64(t.After / time.Microsecond)}})},
		{Name: "AccuracyUSec", Value: dbus.MakeVariant(uint64(time.Second / time.Microsecond))},
	}
	service := []sdbus.Property{
		sdbus.PropDescription(t.Description),
		sdbus.PropType("oneshot"),
		{Name: "ExecStart", Value: dbus.MakeVariant(execs)},
		{Name: "CollectMode", Value: dbus.MakeVariant("inactive-or-failed")},
	}
	return timer, []sdbus.PropertyCollection{{Name: t.Service, Properties: service}}, nil
}

// ResetFailed is systemctl reset-failed NAME; a unit not loaded is
// nothing to reset.
func (c *Conn) ResetFailed(ctx context.Context, name string) error {
	err := c.c.ResetFailedUnitContext(ctx, name)
	var derr dbus.Error
	if errors.As(err, &derr) && derr.Name == "org.freedesktop.systemd1.NoSuchUnit" {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reset-failed %s: %w", name, err)
	}
	return nil
}
