package installer

import (
	"context"
	"errors"
	"fmt"
	"path"
	"time"

	"github.com/cri-nstarget/cri-nstarget/installer/kubelet"
)

// Install brings the node to this version of the shim, from wherever the
// state on the host says a previous installer stopped: a first install, an
// install resumed, an upgrade, or a check that all is still in place. It
// returns nil once the node is installed, a *Failure when it was refused or
// rolled back (or an upgrade did not take), or another error when it could
// not finish (its state then says where to resume). ctx's end interrupts
// only waits that have not changed the kubelet yet.
func (in *Installer) Install(ctx context.Context) error {
	st, err := loadState(in.o.Root)
	if err != nil {
		return err
	}
	switch st.Phase {
	case PhaseRollingBack:
		return in.rollBack(ctx, st, errors.New(st.Reason))
	case PhaseRemoving:
		in.o.Log.Info("a removal was under way: finishing it before installing")
		if err := in.remove(ctx, st); err != nil {
			return err
		}
		st = State{}
	case PhaseDone, PhaseUpgrading:
		return in.keep(ctx, st)
	case PhaseRolledBack:
		if st.Failed == in.shimSHA {
			msg := fmt.Sprintf("cri-nstarget %s was rolled back on this node before, and is not tried again: %s", in.o.Version, st.Reason)
			in.label(ctx, StateRolledBack, msg)
			in.o.Cluster.Event(ctx, true, "RolledBack", msg)
			return &Failure{StateRolledBack, msg}
		}
		in.o.Log.WithField("before", st.Reason).Info("an earlier version was rolled back here; installing this one")
		st = State{}
	case PhaseFiles, PhaseShim, PhaseKubelet, PhaseKubeletRestarted:
		if st.ShimSHA != in.shimSHA {
			return in.resumeOther(ctx, st)
		}
	}
	return in.install(ctx, st)
}

// install runs the steps from st's phase on: files and the shim, then the
// kubelet.
func (in *Installer) install(ctx context.Context, st State) error {
	if st.Phase == "" || st.Phase == PhaseFiles || st.Phase == PhaseShim {
		p, err := in.inspect(ctx, st)
		var refused errRefused
		switch {
		case errors.As(err, &refused) && st.Phase == "":
			return in.refuse(ctx, refused.reason)
		case errors.As(err, &refused):
			return in.rollBack(ctx, st, fmt.Errorf("the node changed during the install: %s", refused.reason))
		case err != nil:
			return err
		}
		if st.Phase == "" {
			st = State{Phase: PhaseFiles, Version: in.o.Version, ShimSHA: in.shimSHA, Socket: p.socket, ShimRun: p.shimRun, Backend: p.backend}
			in.o.Log.WithFields(map[string]any{"version": in.o.Version, "kubelet": p.edit.Path, "from": p.edit.From, "to": p.edit.To}).Info("installing")
			in.label(ctx, StateInstalling, fmt.Sprintf("%s: installing", in.o.Version))
		}
		st.Kubelet = &p.edit
		if st.Phase == PhaseFiles {
			if err := in.save(st); err != nil {
				return err
			}
			if err := in.writeFiles(ctx, &st, p.config); err != nil {
				return in.rollBack(ctx, st, err)
			}
			if err := in.startShim(ctx, st); err != nil {
				return in.rollBack(ctx, st, err)
			}
			st.Phase = PhaseShim
		} else if err := in.ensureShim(ctx, st); err != nil {
			return in.rollBack(ctx, st, err)
		}
		if err := in.save(st); err != nil {
			return err
		}
	}
	return in.switchKubelet(ctx, st)
}

// refuse reports a node this installer does not change, and changes
// nothing.
func (in *Installer) refuse(ctx context.Context, reason string) error {
	in.o.Log.WithField("reason", reason).Error("refusing to install: nothing was changed on this node")
	in.label(ctx, StateRefused, reason)
	in.o.Cluster.Event(ctx, true, "InstallRefused", "cri-nstarget "+in.o.Version+" was not installed, and nothing was changed: "+reason)
	return &Failure{StateRefused, reason}
}

// writeFiles writes the shim's files, each atomically, recording each in
// st before it is written.
func (in *Installer) writeFiles(ctx context.Context, st *State, cfg []byte) error {
	type file struct {
		path string
		data []byte
		mode uint32
	}
	files := []file{{in.binPath(), in.o.Shim, 0o755}, {UnitPath, in.unit, 0o644}}
	if cfg != nil {
		files = append(files, file{ConfigPath, cfg, 0o644})
	}
	for _, f := range files {
		if !created(*st, f.path) {
			for _, d := range missingDirs(in.o.Root, path.Dir(f.path)) {
				st.Created = append(st.Created, Created{Path: d, Dir: true})
			}
			st.Created = append(st.Created, Created{Path: f.path, SHA256: sha(f.data)})
			if err := in.save(*st); err != nil {
				return err
			}
		}
		if err := writeFile(in.o.Root, f.path, f.data, modeOf(f.mode)); err != nil {
			return fmt.Errorf("write %s: %w", f.path, err)
		}
		if err := in.at("wrote:" + f.path); err != nil {
			return err
		}
	}
	return nil
}

// startShim loads, enables and starts the shim's unit, and waits for its
// health.
func (in *Installer) startShim(ctx context.Context, st State) error {
	if err := in.o.Systemd.Reload(ctx); err != nil {
		return err
	}
	if err := in.o.Systemd.Enable(ctx, UnitName); err != nil {
		return fmt.Errorf("enable %s: %w", UnitName, err)
	}
	if err := in.at("shim:enabled"); err != nil {
		return err
	}
	return in.ensureShim(ctx, st)
}

// ensureShim starts the shim's unit (nothing when it runs) and waits until
// its socket's health service says SERVING, for HealthTimeout at most.
func (in *Installer) ensureShim(ctx context.Context, st State) error {
	deadline := time.Now().Add(in.o.HealthTimeout)
	sctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer cancel()
	if err := in.o.Systemd.Start(sctx, UnitName); err != nil {
		return fmt.Errorf("the shim did not start (journalctl -u %s on the node): %w", UnitName, err)
	}
	if err := in.at("shim:started"); err != nil {
		return err
	}
	err := in.waitFor(sctx, deadline, func(ctx context.Context) error { return in.o.CRI.Serving(ctx, in.socket(st.Socket)) })
	if err != nil {
		return fmt.Errorf("the shim was not healthy within %s (journalctl -u %s on the node): %w", in.o.HealthTimeout, UnitName, err)
	}
	return nil
}

// switchKubelet points the kubelet at the shim under a restart slot, the
// host's guard armed before each restart, and waits for the node to be
// Ready through it and the smoke test to pass; from the state's phase on.
func (in *Installer) switchKubelet(ctx context.Context, st State) error {
	// A restart onto the shim waits for a slot, as long as ctx lets it;
	// a kubelet restarted already is confirmed or rolled back without one.
	if st.Phase == PhaseShim || st.Phase == PhaseKubelet {
		if in.o.PodUID == "" {
			return errNoSmokePod
		}
		if err := in.slot(ctx); err != nil {
			return err
		}
	}
	if st.Phase == PhaseShim {
		u, err := in.o.Systemd.Unit(ctx, in.o.KubeletUnit)
		if err != nil {
			return err
		}
		st.Phase, st.KubeletPID, st.KubeletEdited, st.KubeletRestored = PhaseKubelet, u.MainPID, true, false
		if err := in.save(st); err != nil {
			return err
		}
	}
	// From here on the kubelet is being changed: ctx's end (SIGTERM) no
	// longer stops the installer, which finishes or rolls back within its
	// bounds.
	if st.Phase == PhaseKubelet {
		if err := in.restartOnShim(context.WithoutCancel(ctx), &st); err != nil {
			return err
		}
	} else if err := in.resumeRestarted(ctx, &st); err != nil {
		return err
	}
	return in.confirm(context.WithoutCancel(ctx), st)
}

// restartOnShim arms the guard, writes the kubelet's edit and restarts the
// kubelet, once the slot is known to be still held.
func (in *Installer) restartOnShim(ctx context.Context, st *State) error {
	if err := in.slot(ctx); err != nil {
		return err
	}
	if err := in.armGuard(ctx, *st.Kubelet); err != nil {
		return in.rollBack(ctx, *st, err)
	}
	if err := in.applyEdit(ctx, *st.Kubelet); err != nil {
		return in.rollBack(ctx, *st, err)
	}
	now := time.Now()
	st.Phase, st.RestartedAt, st.Deadline = PhaseKubeletRestarted, now, now.Add(in.o.ReadyTimeout)
	if err := in.save(*st); err != nil {
		return err
	}
	if err := in.o.Systemd.Restart(ctx, in.o.KubeletUnit); err != nil {
		return in.rollBack(ctx, *st, fmt.Errorf("restart %s: %w", in.o.KubeletUnit, err))
	}
	return in.at("kubelet:restarted")
}

// resumeRestarted resumes after the kubelet's restart was recorded: a
// kubelet not restarted yet is (under a slot, waited for as ctx lets it,
// the guard armed again first); one that was is confirmed under the guard
// armed before it, without a slot.
func (in *Installer) resumeRestarted(ctx context.Context, st *State) error {
	u, err := in.o.Systemd.Unit(ctx, in.o.KubeletUnit)
	if err != nil {
		return err
	}
	if u.MainPID != st.KubeletPID {
		in.o.Log.WithField("since", st.RestartedAt).Info("resuming: the kubelet was restarted; waiting for the node to be Ready through the shim")
		in.trySlot(ctx)
		return nil
	}
	// Killed before the restart was asked: ask it now, under a slot.
	in.o.Log.Info("resuming: the kubelet was not restarted yet")
	if err := in.slot(ctx); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	if err := in.armGuard(ctx, *st.Kubelet); err != nil {
		return in.rollBack(ctx, *st, err)
	}
	now := time.Now()
	st.RestartedAt, st.Deadline = now, now.Add(in.o.ReadyTimeout)
	if err := in.save(*st); err != nil {
		return err
	}
	if err := in.o.Systemd.Restart(ctx, in.o.KubeletUnit); err != nil {
		return in.rollBack(ctx, *st, fmt.Errorf("restart %s: %w", in.o.KubeletUnit, err))
	}
	return nil
}

// confirm waits for the node to be Ready through the shim, runs the smoke
// test, and disarms the guard: then the node is installed, and the slot
// given back. Anything else rolls back.
func (in *Installer) confirm(ctx context.Context, st State) error {
	if err := in.waitThroughShim(ctx, st); err != nil {
		return in.rollBack(ctx, st, err)
	}
	if err := in.smoke(ctx, st); err != nil {
		return in.rollBack(ctx, st, err)
	}
	fired, err := in.disarmGuard(ctx, *st.Kubelet)
	if err == nil && fired {
		err = fmt.Errorf("the host's guard put %s back (%s after it was armed) before the install was confirmed", st.Kubelet.Path, in.o.GuardAfter)
	}
	if err != nil {
		return in.rollBack(ctx, st, err)
	}
	st.Phase = PhaseDone
	if err := in.save(st); err != nil {
		return err
	}
	in.releaseSlot(ctx)
	msg := fmt.Sprintf("cri-nstarget %s installed: the kubelet uses %s (was %s; set in %s); a pod sandbox was run and removed, and a container run to exit 0 in this installer's pod, through it", st.Version, st.Kubelet.To, st.Kubelet.From, st.Kubelet.Path)
	in.o.Log.Info(msg)
	in.label(ctx, StateInstalled, msg)
	in.o.Cluster.Event(ctx, false, "Installed", msg)
	return nil
}

// waitThroughShim waits until the restarted kubelet has the node Ready
// through the shim, until the state's deadline; it ends at once when the
// kubelet reported the node NotReady for NotReadyGrace, or the guard put
// the kubelet's file back. The apiserver out of reach is waited out (until
// the deadline). A slot lost meanwhile is told, not acted on: the kubelet
// has restarted already.
func (in *Installer) waitThroughShim(ctx context.Context, st State) error {
	var notReadySince time.Time
	warned := false
	err := in.waitKnown(ctx, st.Deadline, func(ctx context.Context) error {
		if in.guardFired(*st.Kubelet) {
			return stopWait{fmt.Errorf("the host's guard put %s back before the node was Ready through the shim", st.Kubelet.Path)}
		}
		if lost := in.slotLost(); lost != nil && !warned {
			warned = true
			in.o.Log.WithError(lost).Warn("the restart slot was lost while the kubelet restarts: another node may restart its own now")
		}
		err := in.kubeletReady(ctx, st.KubeletPID, st.RestartedAt, func(ep string) bool { return ep == st.Kubelet.To })
		if !errors.Is(err, errNotReady) {
			notReadySince = time.Time{}
			return err
		}
		if notReadySince.IsZero() {
			notReadySince = time.Now()
		}
		if d := time.Since(notReadySince); d >= in.o.NotReadyGrace {
			return stopWait{fmt.Errorf("the kubelet reported the node NotReady through the shim for %s", d.Round(10*time.Millisecond))}
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("the node was not Ready through the shim (within %s of the kubelet's restart): %w", in.o.ReadyTimeout, err)
	}
	return nil
}

// applyEdit writes the kubelet's edit unless the file already has it.
func (in *Installer) applyEdit(ctx context.Context, e kubelet.Edit) error {
	cur, ok, err := readHost(in.o.Root, e.Path)
	if err != nil {
		return err
	}
	switch {
	case ok && string(cur) == string(e.After):
	case ok && string(cur) == string(e.Before):
		mode, err := fileMode(in.o.Root, e.Path)
		if err != nil {
			return err
		}
		if err := writeFile(in.o.Root, e.Path, e.After, mode); err != nil {
			return fmt.Errorf("write %s: %w", e.Path, err)
		}
	default:
		return fmt.Errorf("%s changed while the installer ran: not touching it", e.Path)
	}
	if err := in.at("kubelet:edited"); err != nil {
		return err
	}
	if e.Reload() {
		return in.o.Systemd.Reload(ctx)
	}
	return nil
}

// kubeletReady checks that a kubelet other than oldPID runs, with an
// endpoint that want accepts (read from its command line and files), and
// that the node is Ready in a status reported after since.
func (in *Installer) kubeletReady(ctx context.Context, oldPID int, since time.Time, want func(endpoint string) bool) error {
	u, err := in.o.Systemd.Unit(ctx, in.o.KubeletUnit)
	if err != nil {
		return err
	}
	if u.ActiveState != "active" || u.MainPID == 0 {
		return fmt.Errorf("%s is %s", in.o.KubeletUnit, u.ActiveState)
	}
	if u.MainPID == oldPID {
		return fmt.Errorf("%s has not restarted (pid %d)", in.o.KubeletUnit, u.MainPID)
	}
	_, l, err := in.readKubelet(ctx)
	if err != nil {
		return err
	}
	if !want(l.Endpoint) {
		return fmt.Errorf("the kubelet uses %s (set in %s)", l.Endpoint, l.Place.Path)
	}
	ready, heartbeat, err := in.o.Cluster.Ready(ctx)
	switch {
	case err != nil:
		return apiError{err}
	case !heartbeat.After(since.Truncate(time.Second)):
		return fmt.Errorf("the kubelet has reported no status since its restart (last %s)", heartbeat.Format(time.RFC3339))
	case !ready:
		return errNotReady
	}
	return nil
}

// errNotReady: the kubelet restarted reported the node NotReady.
var errNotReady = errors.New("the node is not Ready")

// apiError: the apiserver did not answer.
type apiError struct{ error }

func (e apiError) Unwrap() error { return e.error }

// errNoSmokePod: the kubelet is not switched without a smoke test to
// confirm it.
var errNoSmokePod = errors.New("no pod for the smoke test through the shim (--pod-uid, $POD_UID: its container runs in the installer's own pod, of the pod's image unless --smoke-image): the kubelet is not switched without it")
