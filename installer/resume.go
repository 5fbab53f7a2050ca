package installer

import (
	"context"
	"errors"
	"fmt"
)

// resumeOther takes over a half-done install of another version
// (st.Version, st.ShimSHA) and ends it as this version's, or rolled back;
// it never reports this version installed while the other runs. Before
// the kubelet was touched (files, shim), the install is made this
// version's (supersede). After, the other's install is finished first, on
// the shim that runs (the kubelet onto it, or rolled back), then upgraded
// to this version through a trial like any installed node; when the other
// was rolled back, this version installs from the start.
func (in *Installer) resumeOther(ctx context.Context, st State) error {
	in.o.Log.WithFields(map[string]any{"version": st.Version, "phase": st.Phase, "this": in.o.Version}).
		Info("an install of another version was under way: ending it before this one")
	if st.Phase == PhaseFiles || st.Phase == PhaseShim {
		return in.supersede(ctx, st)
	}
	err := in.install(ctx, st)
	var f *Failure
	switch {
	case errors.As(err, &f) && f.State == StateRolledBack:
		in.o.Log.WithField("version", st.Version).Info("that install was rolled back: installing this version from the start")
		return in.Install(ctx)
	case err != nil:
		return err
	}
	if st, err = loadState(in.o.Root); err != nil {
		return err
	}
	return in.checkOrUpgrade(ctx, st)
}

// supersede makes a half-done install whose kubelet was not touched this
// version's: the other's shim stopped (nothing uses it), the record of the
// files renewed to this version's content, then the install resumed from
// its files, which writes them anew and starts this version's shim. The
// shim is stopped before the record is renewed: a kill in between finds
// the other's record again, and does the same.
func (in *Installer) supersede(ctx context.Context, st State) error {
	p, err := in.inspect(ctx, st)
	if err != nil {
		return in.install(ctx, st) // a refusal there rolls the other's install back
	}
	u, err := in.o.Systemd.Unit(ctx, UnitName)
	if err != nil {
		return err
	}
	if u.LoadState == "loaded" && u.Files.FragmentPath == UnitPath && u.ActiveState != "inactive" {
		if err := in.o.Systemd.Stop(ctx, UnitName); err != nil {
			return fmt.Errorf("stop %s: %w", UnitName, err)
		}
		if err := in.at("supersede:stopped"); err != nil {
			return err
		}
	}
	recordAs(&st, map[string][]byte{in.binPath(): in.o.Shim, UnitPath: in.unit, ConfigPath: p.config})
	st.Phase, st.Version, st.ShimSHA = PhaseFiles, in.o.Version, in.shimSHA
	if err := in.save(st); err != nil {
		return err
	}
	return in.install(ctx, st)
}

// recordAs sets the sha256 of the files in st.Created that content names
// (nil: left as recorded) to their new content's.
func recordAs(st *State, content map[string][]byte) {
	for i, c := range st.Created {
		if b := content[c.Path]; !c.Dir && b != nil {
			st.Created[i].SHA256 = sha(b)
		}
	}
}
