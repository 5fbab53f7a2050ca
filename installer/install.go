package installer

import (
	"context"
	"errors"
	"fmt"
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
	case PhaseRollBackKubelet, PhaseRollBackShim:
		return in.rollBack(ctx, st, errors.New(st.Reason))
	case PhaseRemoveKubelet, PhaseRemoveShim:
		in.o.Log.Info("a removal was under way: finishing it before installing")
		if err := in.remove(ctx, st); err != nil {
			return err
		}
		st = State{}
	case PhaseDone, PhaseUpgrading:
		return in.checkOrUpgrade(ctx, st)
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

// install walks the table from st's phase to PhaseDone: the shim's files
// and unit, then the kubelet onto it, confirmed. A phase on record is
// resumed (its row's resume first).
func (in *Installer) install(ctx context.Context, st State) error {
	return in.walk(ctx, &st, st.Phase != PhaseNew, PhaseDone)
}

// advance moves st to its row's next phase and saves it.
func (in *Installer) advance(st *State) error {
	st.Phase = rows[st.Phase].next
	return in.save(*st)
}

// begin inspects a node with nothing of this installer's: a node it does
// not change is refused; else the install's state is made (PhaseFiles, not
// saved yet: putShim saves it first).
func (in *Installer) begin(ctx context.Context, st *State) error {
	p, err := in.inspect(ctx, *st)
	var refused errRefused
	switch {
	case errors.As(err, &refused):
		return in.refuse(ctx, refused.reason)
	case err != nil:
		return err
	}
	*st = State{Phase: PhaseFiles, Version: in.o.Version, ShimSHA: in.shimSHA, Socket: p.socket, ShimRun: p.shimRun, Backend: p.backend, Kubelet: &p.edit}
	in.plan = &p
	in.o.Log.WithFields(map[string]any{"version": in.o.Version, "kubelet": p.edit.Path, "from": p.edit.From, "to": p.edit.To}).Info("installing")
	in.label(ctx, StateInstalling, fmt.Sprintf("%s: installing", in.o.Version))
	return nil
}

// reinspect inspects the node again when an install before the kubelet's
// switch is resumed: a node that now refuses rolls the install back.
func (in *Installer) reinspect(ctx context.Context, st *State) error {
	p, err := in.inspect(ctx, *st)
	var refused errRefused
	switch {
	case errors.As(err, &refused):
		return in.rollBack(ctx, *st, fmt.Errorf("the node changed during the install: %s", refused.reason))
	case err != nil:
		return err
	}
	st.Kubelet, in.plan = &p.edit, &p
	return nil
}

// refuse reports a node this installer does not change, and changes
// nothing.
func (in *Installer) refuse(ctx context.Context, reason string) error {
	in.o.Log.WithField("reason", reason).Error("refusing to install: nothing was changed on this node")
	in.label(ctx, StateRefused, reason)
	in.o.Cluster.Event(ctx, true, "InstallRefused", "cri-nstarget "+in.o.Version+" was not installed, and nothing was changed: "+reason)
	return &Failure{StateRefused, reason}
}
