package preflight

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cri-nstarget/cri-nstarget/support"
)

// kubeletBinaries asks each running kubelet's binary its --version; with
// none running, the kubelet found on p.Path; with neither, nothing.
func kubeletBinaries(ctx context.Context, p Probe, running []KubeletProc) []KubeletBinary {
	var out []KubeletBinary
	for _, k := range running {
		if k.PID > 0 {
			out = append(out, kubeletVersion(ctx, k.PID, filepath.Join(p.ProcRoot, strconv.Itoa(k.PID), "exe"), p))
		}
	}
	if len(out) > 0 {
		return out
	}
	if path, ok := lookPath("kubelet", p.Path); ok {
		out = append(out, kubeletVersion(ctx, 0, path, p))
	}
	return out
}

// kubeletVersion runs `path --version` ("Kubernetes v1.37.0") within
// p.Timeout.
func kubeletVersion(ctx context.Context, pid int, path string, p Probe) KubeletBinary {
	k := KubeletBinary{PID: pid, Path: path}
	ctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.WaitDelay = p.Timeout // a child left holding its output does not hold the check
	out, err := cmd.Output()
	switch {
	case ctx.Err() != nil:
		k.Err = fmt.Errorf("%s --version: no answer within %v", path, p.Timeout)
	case err != nil:
		k.Err = fmt.Errorf("%s --version: %w", path, err)
	default:
		k.Version, k.Err = parseKubeletVersion(out)
	}
	return k
}

// parseKubeletVersion takes the version from `kubelet --version`'s output.
func parseKubeletVersion(out []byte) (string, error) {
	for _, f := range strings.Fields(string(out)) {
		if _, err := support.Minor(f); err == nil && strings.HasPrefix(f, "v") {
			return f, nil
		}
	}
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return "", fmt.Errorf("no version in its --version output %q", first)
}

// lookPath finds an executable file name in the directories of path ($PATH's
// form), as exec.LookPath does in $PATH.
func lookPath(name, path string) (string, bool) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, true
		}
	}
	return "", false
}
