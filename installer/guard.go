package installer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cri-nstarget/cri-nstarget/installer/kubelet"
)

// The host's guard: a transient systemd timer and service that put the
// kubelet's file back as it was and restart the kubelet, armed before each
// restart of the kubelet onto the shim and disarmed only once the node is
// Ready through the shim and the smoke test passed. It needs nothing of
// the installer's pod: an installer killed after the switch, or not
// recreated because the shim cannot create its container, still leaves a
// kubelet on a serving runtime. It runs host binaries only.
const (
	GuardTimer   = "cri-nstarget-guard.timer"
	GuardService = "cri-nstarget-guard.service"
	// guardCopy is the kubelet's file as it was, which the guard copies
	// back.
	guardCopy = StateDir + "/kubelet-file.before"
)

// guardTimer is the guard for e: the copy made beside the kubelet's file
// and moved over it (atomic), systemd reloaded when the file is a unit's,
// the kubelet restarted.
func (in *Installer) guardTimer(e kubelet.Edit) Timer {
	tmp := e.Path + ".cri-nstarget-guard"
	cmds := [][]string{{"/bin/cp", "-p", guardCopy, tmp}, {"/bin/mv", "-f", tmp, e.Path}}
	if e.Reload() {
		cmds = append(cmds, []string{"/bin/systemctl", "daemon-reload"})
	}
	cmds = append(cmds, []string{"/bin/systemctl", "restart", in.o.KubeletUnit})
	return Timer{
		Name: GuardTimer, Service: GuardService, After: in.o.GuardAfter, Commands: cmds,
		Description: "cri-nstarget's install guard: puts " + e.Path + " back and restarts the kubelet unless the install was confirmed",
	}
}

// armGuard saves the kubelet's file as it was (atomically, beside the
// state) and starts the guard's timer, GuardAfter from now. A timer or
// service left by an earlier run is stopped and reset first: arming again
// starts the time again.
func (in *Installer) armGuard(ctx context.Context, e kubelet.Edit) error {
	mode, err := fileMode(in.o.Root, e.Path)
	if err != nil {
		return err
	}
	if err := writeFile(in.o.Root, guardCopy, e.Before, mode); err != nil {
		return fmt.Errorf("save the kubelet's file for the guard: %w", err)
	}
	if err := in.stopGuard(ctx, true); err != nil {
		return err
	}
	if err := in.o.Systemd.StartTimer(ctx, in.guardTimer(e)); err != nil {
		return fmt.Errorf("arm the host's guard (%s): %w", GuardTimer, err)
	}
	in.o.Log.WithField("after", in.o.GuardAfter).Info("armed the host's guard: it restores the kubelet unless the install is confirmed")
	return in.at("guard:armed")
}

// disarmGuard stops the guard's timer, lets a service that already runs
// (the guard firing) finish, and resets both; then removes the copy. fired
// says whether the guard put the kubelet's file back.
func (in *Installer) disarmGuard(ctx context.Context, e kubelet.Edit) (fired bool, err error) {
	if err := in.stopGuard(ctx, false); err != nil {
		return false, err
	}
	cur, ok, err := readHost(in.o.Root, e.Path)
	if err != nil {
		return false, err
	}
	if err := removeHost(in.o.Root, guardCopy); err != nil {
		return false, err
	}
	return ok && bytes.Equal(cur, e.Before), in.at("guard:disarmed")
}

// stopGuard stops the guard's timer, and its service: stopped when stop,
// else waited for until it no longer runs (ReadyTimeout at most). Then
// both are reset; neither loaded is nothing to do.
func (in *Installer) stopGuard(ctx context.Context, stop bool) error {
	if err := in.stopLoaded(ctx, GuardTimer); err != nil {
		return err
	}
	if stop {
		if err := in.stopLoaded(ctx, GuardService); err != nil {
			return err
		}
	} else {
		err := in.waitFor(ctx, time.Now().Add(in.o.ReadyTimeout), func(ctx context.Context) error {
			u, err := in.o.Systemd.Unit(ctx, GuardService)
			if err == nil && running(u.ActiveState) {
				err = errors.New("the guard is putting the kubelet back")
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("disarm the host's guard: %w", err)
		}
	}
	for _, name := range []string{GuardTimer, GuardService} {
		if err := in.o.Systemd.ResetFailed(ctx, name); err != nil {
			return err
		}
	}
	return nil
}

func (in *Installer) stopLoaded(ctx context.Context, name string) error {
	u, err := in.o.Systemd.Unit(ctx, name)
	if err != nil {
		return err
	}
	if u.LoadState != "loaded" {
		return nil
	}
	if err := in.o.Systemd.Stop(ctx, name); err != nil {
		return fmt.Errorf("stop %s: %w", name, err)
	}
	return nil
}

func running(activeState string) bool {
	return activeState == "active" || activeState == "activating" || activeState == "deactivating" || activeState == "reloading"
}

// guardFired: the kubelet's file is as it was before the edit again, which
// only the guard (or a person) does while the install waits.
func (in *Installer) guardFired(e kubelet.Edit) bool {
	cur, ok, err := readHost(in.o.Root, e.Path)
	return err == nil && ok && bytes.Equal(cur, e.Before)
}

// smoke runs the smoke test through the shim, within SmokeTimeout, its
// container in this installer's pod (PodUID), of SmokeImage or the pod's
// own image, as the shim lists its running container.
func (in *Installer) smoke(ctx context.Context, st State) error {
	sctx, cancel := context.WithTimeout(ctx, in.o.SmokeTimeout)
	defer cancel()
	image := in.o.SmokeImage
	if in.o.PodUID == "" {
		return errNoSmokePod
	}
	if image == "" {
		var err error
		if image, err = in.o.CRI.ImageOf(sctx, in.socket(st.Socket), in.o.PodUID); err != nil {
			return fmt.Errorf("the smoke test through the shim failed: the installer's own image, through the shim: %w", err)
		}
	}
	if err := in.o.CRI.Smoke(sctx, in.socket(st.Socket), in.o.PodUID, image, in.o.SmokeCommand); err != nil {
		return fmt.Errorf("the smoke test through the shim failed (a pod sandbox and a container of %s, %q): %w", image, in.o.SmokeCommand, err)
	}
	return in.at("smoke:passed")
}
