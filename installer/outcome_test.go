package installer

import (
	"context"
	"errors"
	"strings"
)

// Trial is the fake node's trial of a binary: the bad shim never answers,
// others do. It checks that the trial is given containerd's sockets and
// the node's config as the installer sees them.
func (n *node) Trial(_ context.Context, spec TrialSpec) error {
	if !strings.HasPrefix(spec.RuntimeEndpoint, "unix://"+n.root+"/") || !strings.HasPrefix(spec.ContainerdAddress, n.root+"/") ||
		spec.Config != "" && !strings.HasPrefix(spec.Config, n.root+"/") {
		n.t.Errorf("trial of %+v: paths not under the host's root %s", spec, n.root)
	}
	if spec.SHA256 == sha([]byte(shimBad)) {
		return errors.New("rpc error: code = Unavailable desc = connection refused")
	}
	return nil
}
