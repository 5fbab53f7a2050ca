package installer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"

	"github.com/cri-nstarget/cri-nstarget/pins"
)

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

// remove walks the removal's rows from st's phase: the kubelet back on
// its own endpoint (when it was switched), then the shim taken off; then
// the state file removed, and the Node's label.
func (in *Installer) remove(ctx context.Context, st State) error {
	ctx = context.WithoutCancel(ctx)
	if err := in.enterUndo(&st, rows[st.Phase].remove, func(*State) {}); err != nil {
		return err
	}
	in.label(ctx, StateRemoving, "removing cri-nstarget")
	if err := in.walk(ctx, &st, false, PhaseRemoved); err != nil {
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

// unpin unmounts, in the host's mount namespace, the pins under the shim's
// state dir whose container is not CREATED (a running container joined its
// namespaces when it started; one that is gone needs nothing), and removes
// their files; then the state dir, when no pin is kept.
func (in *Installer) unpin(ctx context.Context, st *State) error {
	if st.ShimRun == "" {
		return nil
	}
	dir := pins.Under(st.ShimRun)
	mounts, err := in.o.Mounts.Under(st.ShimRun)
	if err != nil {
		return fmt.Errorf("list the host's mounts under %s: %w", st.ShimRun, err)
	}
	byID := map[string][]string{}
	for _, m := range mounts {
		id, ok := pins.ContainerOf(st.ShimRun, m)
		if !ok {
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
	if err := in.removePinFiles(dir, func(id string) bool { return created[id] && len(byID[id]) > 0 }); err != nil {
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
func (in *Installer) removePinFiles(dir string, kept func(id string) bool) error {
	entries, _ := os.ReadDir(in.hostPath(dir))
	for _, e := range entries {
		if kept(e.Name()) {
			continue
		}
		cdir := path.Join(dir, e.Name())
		if left, err := in.o.Mounts.Under(cdir); err != nil || len(left) > 0 {
			return fmt.Errorf("still mounted under %s: %v %v", cdir, left, err)
		}
		if err := os.RemoveAll(in.hostPath(cdir)); err != nil {
			return fmt.Errorf("remove %s: %w", cdir, err)
		}
	}
	return nil
}
