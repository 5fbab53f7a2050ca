package installer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// keep handles a node where the shim is installed: the same version is
// checked (shim healthy, kubelet on it; a kubelet that left it is pointed
// at it again), another version is an upgrade.
func (in *Installer) keep(ctx context.Context, st State) error {
	unit, _, err := readHost(in.o.Root, UnitPath)
	if err != nil {
		return err
	}
	same := st.ShimSHA == in.shimSHA && bytes.Equal(unit, in.unit)
	switch {
	case st.Phase == PhaseDone && same:
		return in.verify(ctx, st)
	case st.Phase == PhaseDone && st.Failed == in.shimSHA:
		in.label(ctx, StateUpgradeBad, st.Reason)
		return &Failure{StateUpgradeBad, fmt.Sprintf("%s failed on this node before and is not tried again (%s); the node stays on %s", in.o.Version, st.Reason, st.Version)}
	}
	return in.upgrade(ctx, st)
}

// verify checks an installed node at an installer's start: the shim runs
// and is healthy, the kubelet is on it, the events kubeconfig is current.
func (in *Installer) verify(ctx context.Context, st State) error {
	if err := in.refreshKubeconfig(&st); err != nil {
		return err
	}
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
		st.Phase, st.Kubelet, st.KubeletEdited, st.KubeletRestored = PhaseShim, &p.edit, false, false
		if err := in.save(st); err != nil {
			return err
		}
		return in.switchKubelet(ctx, st)
	}
	in.label(ctx, StateInstalled, fmt.Sprintf("cri-nstarget %s installed: the kubelet uses %s", st.Version, st.Socket))
	in.o.Log.WithField("version", st.Version).Info("installed, healthy, and the kubelet uses it")
	return nil
}

// refreshKubeconfig writes the events kubeconfig again when the pod's
// (its token) changed; the shim reads it again by itself.
func (in *Installer) refreshKubeconfig(st *State) error {
	if len(in.o.EventsKubeconfig) == 0 || !created(*st, KubeconfigPath) {
		return nil
	}
	if now, err := fileSHA(in.o.Root, KubeconfigPath); err == nil && now == sha(in.o.EventsKubeconfig) {
		return nil
	}
	for i := range st.Created {
		if st.Created[i].Path == KubeconfigPath {
			st.Created[i].SHA256 = sha(in.o.EventsKubeconfig)
		}
	}
	if err := in.save(*st); err != nil {
		return err
	}
	return writeFile(in.o.Root, KubeconfigPath, in.o.EventsKubeconfig, 0o600)
}

// upgrade replaces the shim's binary and unit by this version's and
// restarts the shim alone; the kubelet, pointed at the same socket, is not
// restarted. A new shim that is not healthy is replaced by the one before.
func (in *Installer) upgrade(ctx context.Context, st State) error {
	ctx = context.WithoutCancel(ctx)
	from := st.Version
	if st.Phase == PhaseDone {
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
		st.Phase, st.Previous = PhaseUpgrading, st.ShimSHA
		if err := in.save(st); err != nil {
			return err
		}
	}
	in.o.Log.WithFields(map[string]any{"from": from, "to": in.o.Version}).Info("upgrading: the shim is restarted, the kubelet is not")
	err := in.replaceShim(ctx, st, in.o.Shim, in.unit)
	if errors.Is(err, errCrash) {
		return err
	}
	if err == nil {
		st.Phase, st.Version, st.ShimSHA, st.Previous, st.Failed, st.Reason = PhaseDone, in.o.Version, in.shimSHA, "", "", ""
		if err := in.save(st); err != nil {
			return err
		}
		in.removeBackups()
		msg := fmt.Sprintf("cri-nstarget upgraded from %s to %s: the shim was restarted, the kubelet was not", from, in.o.Version)
		in.o.Log.Info(msg)
		in.label(ctx, StateInstalled, msg)
		in.o.Cluster.Event(ctx, false, "Upgraded", msg)
		return nil
	}

	reason := fmt.Sprintf("%s: %v", in.o.Version, err)
	in.o.Log.WithError(err).Warn("the new version is not healthy: going back to the one before")
	bin, _, rerr := readHost(in.o.Root, previousShim)
	unit, _, uerr := readHost(in.o.Root, previousUnit)
	if rerr != nil || uerr != nil || len(bin) == 0 {
		return in.rollBack(ctx, st, fmt.Errorf("%s; and the version before is not kept (%v %v)", reason, rerr, uerr))
	}
	if err := in.replaceShim(ctx, st, bin, unit); err != nil {
		return in.rollBack(ctx, st, fmt.Errorf("%s; and the version before did not come back either: %w", reason, err))
	}
	st.Phase, st.ShimSHA, st.Failed, st.Reason, st.Previous = PhaseDone, sha(bin), in.shimSHA, reason, ""
	if err := in.save(st); err != nil {
		return err
	}
	in.removeBackups()
	msg := fmt.Sprintf("cri-nstarget %s was not healthy (%v); the node runs %s again", in.o.Version, err, st.Version)
	in.label(ctx, StateUpgradeBad, msg)
	in.o.Cluster.Event(ctx, true, "UpgradeFailed", msg)
	return &Failure{StateUpgradeBad, msg}
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
