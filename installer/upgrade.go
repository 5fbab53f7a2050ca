package installer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// checkOrUpgrade handles a node where the shim is installed: the same
// version is checked (checkOrRepoint), a version that failed here before is
// refused (upgrade-failed), another version is an upgrade.
func (in *Installer) checkOrUpgrade(ctx context.Context, st State) error {
	unit, _, err := readHost(in.o.Root, UnitPath)
	if err != nil {
		return err
	}
	same := st.ShimSHA == in.shimSHA && bytes.Equal(unit, in.unit)
	switch {
	case st.Phase == PhaseDone && same:
		return in.checkOrRepoint(ctx, st)
	case st.Phase == PhaseDone && st.Failed == in.shimSHA:
		msg := fmt.Sprintf("%s failed on this node before and is not tried again (%s); the node stays on %s", in.o.Version, st.Reason, st.Version)
		in.label(ctx, StateUpgradeBad, msg)
		in.o.Cluster.Event(ctx, true, "UpgradeFailed", msg)
		return &Failure{StateUpgradeBad, msg}
	}
	return in.upgrade(ctx, st)
}

// checkOrRepoint checks an installed node at an installer's start: the
// shim runs and is healthy (else the install is rolled back), and the
// kubelet is on it; a kubelet that left it is switched onto it again, from
// PhaseShim, as an install does.
func (in *Installer) checkOrRepoint(ctx context.Context, st State) error {
	if err := in.ensureShim(ctx, st); err != nil {
		return in.rollBack(ctx, st, fmt.Errorf("the shim installed here (%s) is not healthy: %w", st.Version, err))
	}
	_, l, err := in.readKubelet(ctx)
	if err != nil {
		return err
	}
	if onShim, err := in.sameSocket(l.Endpoint, st.Socket); err != nil {
		return err
	} else if !onShim {
		// Someone set the kubelet's endpoint again (kubeadm upgrade node
		// writes its files anew): point it at the shim again.
		msg := fmt.Sprintf("the kubelet uses %s again (set in %s), not the shim: pointing it at the shim again", l.Endpoint, l.Place.Path)
		in.o.Log.Warn(msg)
		in.o.Cluster.Event(ctx, true, "KubeletDrifted", msg)
		p, err := in.inspect(ctx, st)
		if err != nil {
			return err
		}
		st.Phase, st.Kubelet = PhaseShim, &p.edit
		if err := in.save(st); err != nil {
			return err
		}
		return in.walk(ctx, &st, false, PhaseDone)
	}
	in.label(ctx, StateInstalled, fmt.Sprintf("cri-nstarget %s installed: the kubelet uses %s", st.Version, st.Socket))
	in.o.Log.WithField("version", st.Version).Info("installed, healthy, and the kubelet uses it")
	return nil
}

// upgrade replaces the shim's binary and unit by this version's and
// restarts the shim alone; the kubelet, pointed at the same socket, is not
// restarted. The new binary must first answer on a socket of its own (a
// trial): one that does not is never written, and the shim serving is not
// stopped. A new shim that is not healthy after all is replaced by the one
// before.
func (in *Installer) upgrade(ctx context.Context, st State) error {
	from := st.Version
	if st.Phase == PhaseDone || st.Next != in.shimSHA {
		if err := in.trial(ctx, st); err != nil {
			if ctx.Err() != nil {
				return err // stopped (SIGTERM): nothing was changed, nothing is held against this version
			}
			return in.upgradeFailed(context.WithoutCancel(ctx), st, err)
		}
	}
	ctx = context.WithoutCancel(ctx)
	if err := in.backUp(&st); err != nil {
		return err
	}
	in.o.Log.WithFields(map[string]any{"from": from, "to": in.o.Version}).Info("upgrading: the new binary answered its trial; the shim is restarted, the kubelet is not")
	err := in.replaceShim(ctx, st, in.o.Shim, in.unit)
	if errors.Is(err, errCrash) {
		return err
	}
	if err != nil {
		return in.upgradeFailed(ctx, st, fmt.Errorf("%s was not healthy once restarted: %w", in.o.Version, err))
	}
	st.Phase, st.Version, st.ShimSHA, st.Next, st.Failed, st.Reason = PhaseDone, in.o.Version, in.shimSHA, "", "", ""
	recordAs(&st, map[string][]byte{in.binPath(): in.o.Shim, UnitPath: in.unit})
	if err := in.save(st); err != nil {
		return err
	}
	in.removeBackups()
	msg := fmt.Sprintf("cri-nstarget upgraded from %s to %s: the new binary answered on a socket of its own first; the shim was restarted, the kubelet was not", from, in.o.Version)
	in.o.Log.Info(msg)
	in.label(ctx, StateInstalled, msg)
	in.o.Cluster.Event(ctx, false, "Upgraded", msg)
	return nil
}

// backUp keeps the installed binary and unit beside the state, and records
// the upgrade (PhaseUpgrading, to Next); an upgrade under way gets its Next.
func (in *Installer) backUp(st *State) error {
	if st.Phase == PhaseUpgrading {
		if st.Next == in.shimSHA {
			return nil
		}
		st.Next = in.shimSHA
		return in.save(*st)
	}
	bin, ok, err := readHost(in.o.Root, in.binPath())
	if err != nil || !ok {
		return fmt.Errorf("read the installed binary %s: %v", in.binPath(), err)
	}
	unit, _, err := readHost(in.o.Root, UnitPath)
	if err != nil {
		return err
	}
	if err := writeFile(in.o.Root, previousShim, bin, 0o755); err != nil {
		return err
	}
	if err := writeFile(in.o.Root, previousUnit, unit, 0o644); err != nil {
		return err
	}
	st.Phase, st.Next = PhaseUpgrading, in.shimSHA
	return in.save(*st)
}

// upgradeFailed keeps the node on the version before (cause: why this one
// did not take) and reports it. Before the binary was replaced
// (PhaseDone), nothing is touched: the shim serving was never stopped.
// After, the one before is put back and restarted, unless it is what runs.
func (in *Installer) upgradeFailed(ctx context.Context, st State, cause error) error {
	in.o.Log.WithError(cause).Warn("the new version did not take: the node stays on the one before")
	if st.Phase == PhaseUpgrading {
		if err := in.restorePrevious(ctx, st, cause); err != nil {
			return err
		}
	}
	reason := cause.Error()
	st.Phase, st.Failed, st.Reason, st.Next = PhaseDone, in.shimSHA, reason, ""
	if err := in.save(st); err != nil {
		return err
	}
	in.removeBackups()
	msg := fmt.Sprintf("cri-nstarget %s did not take (%s); the node runs %s, and is not tried on %s again", in.o.Version, reason, st.Version, in.o.Version)
	in.label(ctx, StateUpgradeBad, msg)
	in.o.Cluster.Event(ctx, true, "UpgradeFailed", msg)
	return &Failure{StateUpgradeBad, msg}
}

// restorePrevious puts back the binary and unit an upgrade replaced, and
// restarts the shim on them, unless they are what is installed and healthy
// (a trial that failed on resume). Neither coming back: a rollback.
func (in *Installer) restorePrevious(ctx context.Context, st State, cause error) error {
	bin, _, rerr := readHost(in.o.Root, previousShim)
	unit, _, uerr := readHost(in.o.Root, previousUnit)
	if rerr != nil || uerr != nil || len(bin) == 0 {
		return in.rollBack(ctx, st, fmt.Errorf("%v; and the version before is not kept (%v %v)", cause, rerr, uerr))
	}
	cur, _ := fileSHA(in.o.Root, in.binPath())
	curUnit, _, _ := readHost(in.o.Root, UnitPath)
	if cur == sha(bin) && bytes.Equal(curUnit, unit) && in.o.CRI.Serving(ctx, in.socket(st.Socket)) == nil {
		return nil
	}
	if err := in.replaceShim(ctx, st, bin, unit); err != nil {
		if errors.Is(err, errCrash) {
			return err
		}
		return in.rollBack(ctx, st, fmt.Errorf("%v; and the version before did not come back either: %w", cause, err))
	}
	return nil
}

// replaceShim writes bin and unit over the installed ones, and restarts the
// shim on them until healthy.
func (in *Installer) replaceShim(ctx context.Context, st State, bin, unit []byte) error {
	if err := writeFile(in.o.Root, in.binPath(), bin, 0o755); err != nil {
		return err
	}
	if err := in.at("upgrade:binary"); err != nil {
		return err
	}
	cur, _, err := readHost(in.o.Root, UnitPath)
	if err != nil {
		return err
	}
	if !bytes.Equal(cur, unit) {
		if err := writeFile(in.o.Root, UnitPath, unit, 0o644); err != nil {
			return err
		}
		if err := in.o.Systemd.Reload(ctx); err != nil {
			return err
		}
	}
	if err := in.o.Systemd.Restart(ctx, UnitName); err != nil {
		return fmt.Errorf("restart %s (journalctl -u %s on the node): %w", UnitName, UnitName, err)
	}
	if err := in.at("upgrade:restarted"); err != nil {
		return err
	}
	return in.ensureShim(ctx, st)
}

func (in *Installer) removeBackups() {
	for _, p := range []string{previousShim, previousUnit} {
		if err := removeHost(in.o.Root, p); err != nil {
			in.o.Log.WithError(err).Warn("could not remove " + p)
		}
	}
}
