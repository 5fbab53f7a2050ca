package installer

import (
	"context"
	"fmt"

	"github.com/cri-nstarget/cri-nstarget/config"
)

// Trials run a new shim binary beside the one serving, before an upgrade
// restarts the shim onto it (package installer/trial runs it in the
// installer's pod).
type Trials interface {
	// Trial runs the binary whose sha256 is spec.SHA256 on a socket and a
	// state dir of its own, asks it for grpc.health.v1 SERVING and the
	// CRI Version, and stops it, within ctx. nil: it answered.
	Trial(ctx context.Context, spec TrialSpec) error
}

// TrialSpec is what a trial needs of the node. Its paths are as the
// installer sees them (under Options.Root).
type TrialSpec struct {
	// SHA256 is the binary's, Options.Shim's: the bytes an upgrade writes.
	SHA256 string
	// Config is the node's config file, "" when it has none: a new version
	// that cannot read it fails its trial. The trial overrides its
	// listen, state_dir, NRI, metrics, events and socket group.
	Config string
	// RuntimeEndpoint (unix://) and ContainerdAddress are containerd's,
	// as the node's config (or the kubelet's endpoint before) names them.
	RuntimeEndpoint   string
	ContainerdAddress string
}

// trial runs this version's binary as a trial, for HealthTimeout at most.
// It changes nothing on the host.
func (in *Installer) trial(ctx context.Context, st State) error {
	spec, err := in.trialSpec(st)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, in.o.HealthTimeout)
	defer cancel()
	in.o.Log.WithField("version", in.o.Version).Info("trying the new binary on a socket of its own; the shim serving is not touched")
	if err := in.o.Trials.Trial(ctx, spec); err != nil {
		return fmt.Errorf("%s did not answer on a socket of its own within %s: %w", in.o.Version, in.o.HealthTimeout, err)
	}
	return nil
}

// trialSpec reads the node's config, as the shim serving reads it.
func (in *Installer) trialSpec(st State) (TrialSpec, error) {
	spec := TrialSpec{SHA256: in.shimSHA}
	cfg := config.Default()
	data, ok, err := readHost(in.o.Root, ConfigPath)
	switch {
	case err != nil:
		return spec, err
	case ok:
		if cfg, err = config.Decode(ConfigPath, data); err != nil {
			return spec, fmt.Errorf("the node's %w", err)
		}
		spec.Config = in.hostPath(ConfigPath)
	case st.Backend != "":
		sock, err := socketPath(st.Backend)
		if err != nil {
			return spec, err
		}
		cfg.RuntimeEndpoint, cfg.ContainerdAddress = st.Backend, sock
	}
	spec.RuntimeEndpoint = "unix://" + in.socket(cfg.RuntimeEndpoint)
	spec.ContainerdAddress = in.hostPath(cfg.ContainerdAddress)
	return spec, nil
}
