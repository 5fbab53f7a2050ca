package installer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cri-nstarget/cri-nstarget/installer/kubelet"
)

// recordKubelet takes a restart slot (waited for as long as ctx lets it)
// and records the kubelet that runs, before the kubelet is touched: to
// PhaseKubelet.
func (in *Installer) recordKubelet(ctx context.Context, st *State) error {
	if in.o.PodUID == "" {
		return errNoSmokePod
	}
	if err := in.slot(ctx); err != nil {
		return err
	}
	u, err := in.o.Systemd.Unit(ctx, in.o.KubeletUnit)
	if err != nil {
		return err
	}
	st.KubeletPID = u.MainPID
	return in.advance(st)
}

// restartOnShim arms the guard, writes the kubelet's edit and restarts the
// kubelet, once the slot is known to be still held: to
// PhaseKubeletRestarted, saved before the restart is asked. From here on
// the kubelet is being changed: ctx's end (SIGTERM) no longer stops the
// installer, which finishes or rolls back within its bounds.
func (in *Installer) restartOnShim(ctx context.Context, st *State) error {
	if in.o.PodUID == "" {
		return errNoSmokePod
	}
	if err := in.slot(ctx); err != nil {
		return err
	}
	ctx = context.WithoutCancel(ctx)
	if err := in.armGuard(ctx, *st.Kubelet); err != nil {
		return in.rollBack(ctx, *st, err)
	}
	if err := in.applyEdit(ctx, *st.Kubelet); err != nil {
		return in.rollBack(ctx, *st, err)
	}
	now := time.Now()
	st.RestartedAt, st.Deadline = now, now.Add(in.o.ReadyTimeout)
	if err := in.advance(st); err != nil {
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
// given back: to PhaseDone. Anything else rolls back. ctx's end does not
// stop it.
func (in *Installer) confirm(ctx context.Context, st *State) error {
	ctx = context.WithoutCancel(ctx)
	if err := in.waitThroughShim(ctx, *st); err != nil {
		return in.rollBack(ctx, *st, err)
	}
	if err := in.smoke(ctx, *st); err != nil {
		return in.rollBack(ctx, *st, err)
	}
	fired, err := in.disarmGuard(ctx, *st.Kubelet)
	if err == nil && fired {
		err = fmt.Errorf("the host's guard put %s back (%s after it was armed) before the install was confirmed", st.Kubelet.Path, in.o.GuardAfter)
	}
	if err != nil {
		return in.rollBack(ctx, *st, err)
	}
	if err := in.advance(st); err != nil {
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
