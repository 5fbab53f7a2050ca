package installer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/cri-nstarget/cri-nstarget/installer/hostfs"
	"github.com/cri-nstarget/cri-nstarget/installer/kubelet"
)

// rollBack undoes an install that failed (cause), and keeps the reason and
// the failed binary in the state. It returns the *Failure to report.
func (in *Installer) rollBack(ctx context.Context, st State, cause error) error {
	if errors.Is(cause, errCrash) {
		return cause // a simulated kill: the next installer finds the state as it is
	}
	reason := cause.Error()
	ctx = context.WithoutCancel(ctx)
	in.o.Log.WithField("reason", reason).Warn("rolling back")
	if err := in.enterUndo(&st, rows[st.Phase].rollback, func(st *State) {
		st.Reason = reason
		if st.Failed == "" {
			st.Failed = st.ShimSHA
		}
	}); err != nil {
		return err
	}
	if err := in.walk(ctx, &st, false, PhaseRolledBack); err != nil {
		if errors.Is(err, errCrash) {
			return err
		}
		// A node that needs a person does not keep its slot: no other
		// node's restart waits for it.
		in.releaseSlot(ctx)
		msg := fmt.Sprintf("cri-nstarget %s failed (%s), and rolling back failed too: %v", st.Version, reason, err)
		in.o.Log.Error(msg)
		in.label(ctx, StateFailed, msg)
		in.o.Cluster.Event(ctx, true, "RollbackFailed", msg)
		return &Failure{StateFailed, msg}
	}
	st = State{Phase: PhaseRolledBack, Version: st.Version, Reason: reason, Failed: st.Failed}
	if err := in.save(st); err != nil {
		return err
	}
	in.releaseSlot(ctx)
	msg := fmt.Sprintf("cri-nstarget %s rolled back: %s; the kubelet is on its own runtime endpoint again, and the shim's files are removed", st.Version, reason)
	in.label(ctx, StateRolledBack, msg)
	in.o.Cluster.Event(ctx, true, "RolledBack", msg)
	return &Failure{StateRolledBack, reason}
}

// enterUndo moves st to undo, the phase an undoing of the install
// starts at from st's phase (its row's rollback or remove), with set's
// changes, and saves it; nothing when st is there already.
func (in *Installer) enterUndo(st *State, undo Phase, set func(*State)) error {
	if undo == "" {
		return fmt.Errorf("the install's state says %q, which has nothing to undo", st.Phase)
	}
	if st.Phase == undo {
		return nil
	}
	st.Phase = undo
	set(st)
	return in.save(*st)
}

// putKubeletBack is an undo's first step: the kubelet back on its own
// endpoint and Ready (restoreKubelet), then saved at the row's next.
func (in *Installer) putKubeletBack(ctx context.Context, st *State) error {
	if err := in.restoreKubelet(ctx, st); err != nil {
		return err
	}
	return in.advance(st)
}

// takeShimOff is an undo's last step, with the kubelet off the shim: the
// host's guard stopped and its copy of the kubelet's file removed, the
// slot given back, then the shim stopped and its files, and the pins
// nothing will join, removed (removeShim). It ends at the row's next,
// which the caller saves (a rollback) or removes (a removal).
func (in *Installer) takeShimOff(ctx context.Context, st *State) error {
	if err := in.stopGuard(ctx, false); err != nil {
		return err
	}
	if err := removeHost(in.o.Root, guardCopy); err != nil {
		return err
	}
	in.releaseSlot(ctx)
	if err := in.removeShim(ctx, st); err != nil {
		return err
	}
	st.Phase = rows[st.Phase].next
	return nil
}

// restoreKubelet points the kubelet back at st.Kubelet.From, restarts it,
// and waits until it is Ready off the shim. It never waits for a restart
// slot: a restore takes the node back to where it was, and a slot held
// elsewhere (or a node that failed with one) must not keep a kubelet on a
// socket that may not serve. The apiserver out of reach does not fail it:
// the kubelet's endpoint and process are the host's to see.
func (in *Installer) restoreKubelet(ctx context.Context, st *State) error {
	e := *st.Kubelet
	cur, ok, err := readHost(in.o.Root, e.Path)
	if err != nil {
		return err
	}
	content, changed := cur, false
	if ok {
		content, changed, err = e.Revert(cur)
		if errors.Is(err, kubelet.ErrNotPointed) {
			in.o.Log.WithError(err).Warn("the kubelet's file was changed by someone else since the install: left as it is")
		} else if err != nil {
			return err
		}
	}
	u, err := in.o.Systemd.Unit(ctx, in.o.KubeletUnit)
	if err != nil {
		return err
	}
	if !changed && u.MainPID == st.KubeletPID && st.KubeletPID != 0 {
		return nil // the kubelet that runs never read the edit
	}
	if changed {
		if err := in.writeKubelet(ctx, e, content); err != nil {
			return err
		}
	}
	if err := in.at("kubelet:reverted"); err != nil {
		return err
	}
	since := time.Now()
	if err := in.o.Systemd.Restart(ctx, in.o.KubeletUnit); err != nil {
		return fmt.Errorf("restart %s: %w", in.o.KubeletUnit, err)
	}
	if err := in.at("kubelet:restarted-back"); err != nil {
		return err
	}
	// The kubelet is on its own endpoint: the apiserver's word on Ready is
	// a confirmation only, so its absence is not waited out (waitFor, not
	// waitKnown): at the ReadyTimeout the rollback goes on, and says so.
	err = in.waitFor(ctx, time.Now().Add(in.o.ReadyTimeout), func(ctx context.Context) error {
		return in.kubeletReady(ctx, u.MainPID, since, func(ep string) bool { return ep != e.To })
	})
	var api apiError
	if errors.As(err, &api) {
		in.o.Log.WithError(err).Warn("the kubelet runs on its own runtime endpoint again; the apiserver did not say whether the node is Ready")
		err = nil
	}
	if err != nil {
		return fmt.Errorf("the node was not Ready on %s within %s of the kubelet's restart: %w", e.From, in.o.ReadyTimeout, err)
	}
	in.o.Log.WithFields(map[string]any{"endpoint": e.From, "file": e.Path}).Info("the kubelet is back on its own runtime endpoint, and the node Ready")
	return nil
}

// writeKubelet writes the kubelet's file back as content, with its mode,
// and reloads systemd when the file is one of its units or drop-ins.
func (in *Installer) writeKubelet(ctx context.Context, e kubelet.Edit, content []byte) error {
	mode, err := fileMode(in.o.Root, e.Path)
	if err != nil {
		return err
	}
	if err := writeFile(in.o.Root, e.Path, content, mode); err != nil {
		return fmt.Errorf("restore %s: %w", e.Path, err)
	}
	if e.Reload() {
		return in.o.Systemd.Reload(ctx)
	}
	return nil
}

// removeShim stops and disables the shim's unit, removes the files the
// install created (a config changed since is kept), and releases the pins
// no CREATED container needs.
func (in *Installer) removeShim(ctx context.Context, st *State) error {
	u, err := in.o.Systemd.Unit(ctx, UnitName)
	if err != nil {
		return err
	}
	if u.LoadState == "loaded" && u.Files.FragmentPath == UnitPath {
		if err := in.o.Systemd.Stop(ctx, UnitName); err != nil {
			return fmt.Errorf("stop %s: %w", UnitName, err)
		}
		if err := in.at("shim:stopped"); err != nil {
			return err
		}
		if err := in.o.Systemd.Disable(ctx, UnitName); err != nil {
			return fmt.Errorf("disable %s: %w", UnitName, err)
		}
	}
	for i := len(st.Created) - 1; i >= 0; i-- {
		c := st.Created[i]
		if c.Dir {
			removeEmptyDirs(in.o.Root, c.Path)
			continue
		}
		if c.Path == ConfigPath {
			if now, err := fileSHA(in.o.Root, c.Path); err == nil && now != "" && now != c.SHA256 {
				in.o.Log.WithField("file", c.Path).Warn("kept: it was changed since the install wrote it")
				continue
			}
		}
		if err := removeHost(in.o.Root, c.Path); err != nil {
			return fmt.Errorf("remove %s: %w", c.Path, err)
		}
		if err := in.at("removed:" + c.Path); err != nil {
			return err
		}
	}
	for _, p := range []string{previousShim, previousUnit} {
		if err := removeHost(in.o.Root, p); err != nil {
			return err
		}
	}
	if err := in.o.Systemd.Reload(ctx); err != nil {
		return err
	}
	return in.unpin(ctx, st)
}

// fileMode is the permission bits of the host's file.
func fileMode(root, p string) (fs.FileMode, error) {
	fi, err := os.Stat(hostfs.Path(root, p))
	if err != nil {
		return 0, err
	}
	return fi.Mode().Perm(), nil
}

func modeOf(m uint32) fs.FileMode { return fs.FileMode(m) }
