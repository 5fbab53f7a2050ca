package critest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// Backend is a private containerd (internal/harness) with its registry and,
// when pods need a network, a CNI bridge.
type Backend struct {
	*harness.Env
	bridge *harness.Bridge
}

// StartBackend starts the CNI bridge (if network), then containerd in
// opts.Dir under tmp, and pulls the harness's images through containerd's
// CRI. label names the backend in what it prints. Close undoes it all.
func StartBackend(ctx context.Context, label, tmp string, opts harness.EnvOptions, network bool) (_ *Backend, err error) {
	b := &Backend{}
	defer func() {
		if err != nil {
			err = errors.Join(err, b.Close())
		}
	}()
	if network {
		if b.bridge, err = harness.StartBridge(filepath.Join(tmp, "net")); err != nil {
			return nil, err
		}
		opts.CNIConfList = b.bridge.ConfList()
		fmt.Printf("• pod network: bridge %s, %s (forwarding off the bridge dropped)\n", b.bridge.Name, b.bridge.Subnet)
	}
	if err := os.MkdirAll(opts.Dir, harness.DirMode); err != nil {
		return nil, err
	}
	fmt.Printf("• %s: starting %s in %s\n", label, opts.Binary, opts.Dir)
	if b.Env, err = harness.StartWith(ctx, opts); err != nil {
		return nil, err
	}
	if err := b.PullImages(ctx, b.Containerd.Endpoint()); err != nil {
		return nil, err
	}
	return b, nil
}

// BackendConfig is what StartBackend gives containerd for opts and network
// (harness.NodeConfig), the bridge's own names fixed.
func BackendConfig(opts harness.EnvOptions, network bool) (string, error) {
	if network {
		opts.CNIConfList = (&harness.Bridge{Name: "nstbr000000", Subnet: "10.254.0.0/24", Dir: "/run/nstarget-key/net"}).ConfList()
	}
	return harness.NodeConfig(opts)
}

// Close stops containerd (and so its pods), then removes the bridge.
func (b *Backend) Close() error {
	var errs []error
	if b.Env != nil {
		if err := b.Env.Close(); err != nil {
			errs = append(errs, fmt.Errorf("stop containerd: %w", err))
		}
	}
	if b.bridge != nil {
		if err := b.bridge.Close(); err != nil {
			errs = append(errs, fmt.Errorf("remove CNI bridge: %w", err))
		}
	}
	return errors.Join(errs...)
}

// BackendLabel is "containerd-MAJOR.MINOR" from `bin --version`.
func BackendLabel(bin string) (string, error) {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	label, err := backendLabel(out)
	if err != nil {
		return "", fmt.Errorf("%s --version: %w", bin, err)
	}
	return label, nil
}

var versionRE = regexp.MustCompile(`\bv?(\d+)\.(\d+)\.\d+`)

func backendLabel(version []byte) (string, error) {
	m := versionRE.FindSubmatch(version)
	if m == nil {
		return "", fmt.Errorf("no version in %q", version)
	}
	return fmt.Sprintf("containerd-%s.%s", m[1], m[2]), nil
}

// Bridge is the pods' CNI bridge, nil without a pod network.
func (b *Backend) Bridge() *harness.Bridge { return b.bridge }
