package installer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"strings"
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
	if st.Phase != PhaseRollingBack {
		st.Phase, st.Reason = PhaseRollingBack, reason
		if st.Failed == "" {
			st.Failed = st.ShimSHA
		}
		if err := in.save(st); err != nil {
			return err
		}
	}
	if err := in.revert(ctx, &st); err != nil {
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

// revert puts the node back as it was before the install: the kubelet on
// its own endpoint and Ready first (the host's guard armed meanwhile, then
// disarmed), then the shim stopped and its files, and the pins nothing will
// join, removed. Each step is recorded in st before the next.
func (in *Installer) revert(ctx context.Context, st *State) error {
	if st.KubeletEdited && !st.KubeletRestored {
		if err := in.restoreKubelet(ctx, st); err != nil {
			return err
		}
		st.KubeletRestored = true
		if err := in.save(*st); err != nil {
			return err
		}
	}
	if err := in.stopGuard(ctx, false); err != nil {
		return err
	}
	if err := removeHost(in.o.Root, guardCopy); err != nil {
		return err
	}
	in.releaseSlot(ctx)
	return in.removeShim(ctx, st)
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

// unpin unmounts, in the host's mount namespace, the pins under the shim's
// state dir whose container is not CREATED (a running container joined its
// namespaces when it started; one that is gone needs nothing), and removes
// their files; then the state dir, when no pin is kept.
func (in *Installer) unpin(ctx context.Context, st *State) error {
	if st.ShimRun == "" {
		return nil
	}
	pins := path.Join(st.ShimRun, "pins")
	mounts, err := in.o.Mounts.Under(st.ShimRun)
	if err != nil {
		return fmt.Errorf("list the host's mounts under %s: %w", st.ShimRun, err)
	}
	byID := map[string][]string{}
	for _, m := range mounts {
		rel, ok := strings.CutPrefix(m, pins+"/")
		id, _, _ := strings.Cut(rel, "/")
		if !ok || id == "" {
			return fmt.Errorf("%s is mounted under %s, and is not a pin: the state dir is left", m, st.ShimRun)
		}
		byID[id] = append(byID[id], m)
	}
	created := map[string]bool{}
	if len(byID) > 0 {
		if created, err = in.o.CRI.Created(ctx, in.socket(st.Backend)); err != nil {
			in.o.Log.WithError(err).Warn("containerd cannot say which containers are still to start: the pins are kept (a reboot clears them)")
			return nil
		}
	}
	kept := 0
	for id, ms := range byID {
		if created[id] {
			kept++
			continue
		}
		for _, m := range ms {
			if err := in.o.Mounts.Unmount(m); err != nil {
				return fmt.Errorf("unmount the pin %s: %w", m, err)
			}
		}
	}
	if err := in.removePinFiles(pins, func(id string) bool { return created[id] && len(byID[id]) > 0 }); err != nil {
		return err
	}
	if kept > 0 {
		in.o.Log.WithField("containers", kept).Info("pins kept for containers still to start; a reboot clears them")
		return nil
	}
	if left, err := in.o.Mounts.Under(st.ShimRun); err != nil || len(left) > 0 {
		return fmt.Errorf("still mounted under %s: %v %v", st.ShimRun, left, err)
	}
	if err := os.RemoveAll(in.hostPath(st.ShimRun)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", st.ShimRun, err)
	}
	return nil
}

// removePinFiles removes the files of the pins no longer mounted but
// those kept: each directory goes once nothing is mounted below it
// (Under, again, says so).
func (in *Installer) removePinFiles(pins string, kept func(id string) bool) error {
	entries, _ := os.ReadDir(in.hostPath(pins))
	for _, e := range entries {
		if kept(e.Name()) {
			continue
		}
		dir := path.Join(pins, e.Name())
		if left, err := in.o.Mounts.Under(dir); err != nil || len(left) > 0 {
			return fmt.Errorf("still mounted under %s: %v %v", dir, left, err)
		}
		if err := os.RemoveAll(in.hostPath(dir)); err != nil {
			return fmt.Errorf("remove %s: %w", dir, err)
		}
	}
	return nil
}

// Remove takes the shim off the node (the DaemonSet's cleanup mode): the
// install on record undone, then the state file and the Node's label
// removed. A node with nothing on record is left as it is.
func (in *Installer) Remove(ctx context.Context) error {
	st, err := loadState(in.o.Root)
	if err != nil {
		return err
	}
	if st.Phase == "" {
		if hostExists(in.o.Root, UnitPath) {
			in.o.Log.Warnf("%s exists but this installer has no record of it: left as it is", UnitPath)
		}
		in.label(ctx, "", "")
		in.o.Log.Info("nothing of this installer's on this node")
		return nil
	}
	return in.remove(ctx, st)
}

func (in *Installer) remove(ctx context.Context, st State) error {
	ctx = context.WithoutCancel(ctx)
	if st.Phase != PhaseRemoving {
		st.Phase = PhaseRemoving
		if err := in.save(st); err != nil {
			return err
		}
	}
	in.label(ctx, StateRemoving, "removing cri-nstarget")
	if err := in.revert(ctx, &st); err != nil {
		if errors.Is(err, errCrash) {
			return err
		}
		in.releaseSlot(ctx)
		msg := fmt.Sprintf("removing cri-nstarget failed: %v", err)
		in.label(ctx, StateFailed, msg)
		in.o.Cluster.Event(ctx, true, "RemoveFailed", msg)
		return &Failure{StateFailed, msg}
	}
	if err := removeHost(in.o.Root, StatePath); err != nil {
		return err
	}
	removeEmptyDirs(in.o.Root, StateDir)
	if err := in.at("removed:state"); err != nil {
		return err
	}
	in.label(ctx, "", "")
	msg := "cri-nstarget removed: the kubelet is on its own runtime endpoint, and the shim's unit, files and config are gone"
	if st.Kubelet != nil {
		msg = fmt.Sprintf("cri-nstarget removed: the kubelet uses %s again (%s), and the shim's unit, files and config are gone", st.Kubelet.From, st.Kubelet.Path)
	}
	in.o.Log.Info(msg)
	in.o.Cluster.Event(ctx, false, "Removed", msg)
	return nil
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
