package installer

import (
	"context"
	"fmt"
	"path"
	"time"
)

// putShim writes the shim's files and starts its unit, until healthy: to
// PhaseShim. A failure rolls the install back.
func (in *Installer) putShim(ctx context.Context, st *State) error {
	if err := in.save(*st); err != nil {
		return err
	}
	if err := in.writeFiles(ctx, st, in.plan.config); err != nil {
		return in.rollBack(ctx, *st, err)
	}
	if err := in.startShim(ctx, *st); err != nil {
		return in.rollBack(ctx, *st, err)
	}
	return in.advance(st)
}

// recheckShim, when an install resumes with the shim started, inspects the
// node again and waits for the shim's health (starting its unit if it was
// stopped); a failure rolls the install back.
func (in *Installer) recheckShim(ctx context.Context, st *State) error {
	if err := in.reinspect(ctx, st); err != nil {
		return err
	}
	if err := in.ensureShim(ctx, *st); err != nil {
		return in.rollBack(ctx, *st, err)
	}
	return in.save(*st)
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
