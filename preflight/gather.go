package preflight

import (
	"context"
	"errors"
	"io/fs"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	conf "github.com/cri-nstarget/cri-nstarget/config"
)

// Probe is where Gather looks; New gives the node's own.
type Probe struct {
	ProcRoot  string        // the kubelet's processes: "/proc"
	Root      string        // the kubelet's configuration files: "/"
	CgroupDir string        // "/sys/fs/cgroup"
	Timeout   time.Duration // for each socket's answer, and the kubelet's --version
	// Path is where the kubelet's binary is looked for when none runs:
	// $PATH's form, "/usr/local/bin:/usr/bin"; empty: nowhere.
	Path string
}

// NodeProbe looks at this node.
func NodeProbe(timeout time.Duration) Probe {
	return Probe{ProcRoot: "/proc", Root: "/", CgroupDir: "/sys/fs/cgroup", Timeout: timeout, Path: os.Getenv("PATH")}
}

// Gather reads the node for cfg's checks.
func Gather(ctx context.Context, cfg conf.Config, p Probe) Facts {
	var f Facts
	f.Kernel, f.KernelErr = kernelRelease()
	f.Pidfd = pidfdSelf()
	f.Cgroup2, f.CgroupErr = cgroup2(p.CgroupDir)
	tctx, cancel := context.WithTimeout(ctx, p.Timeout)
	defer cancel()
	f.CRI = criVersion(tctx, cfg.RuntimeEndpoint)
	f.API = containerdVersion(tctx, cfg.ContainerdAddress)
	f.NRI = dialUnix(socketPath(cfg.NRISocket), p.Timeout)
	f.SocketDirs = socketDirs(filepath.Dir(socketPath(cfg.Listen)))
	f.Group = lookupGroup(cfg.SocketGroup)
	f.Kubelets = kubelets(p.ProcRoot, p.Root)
	f.KubeletBinaries = kubeletBinaries(ctx, p, f.Kubelets)
	return f
}

// dialUnix connects to a unix socket and hangs up.
func dialUnix(path string, timeout time.Duration) error {
	c, err := net.DialTimeout("unix", path, timeout)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) {
			err = op.Err // "dial unix PATH: " is said by the caller
		}
		return err
	}
	return c.Close()
}

// socketDirs are dir and its parents, from / down.
func socketDirs(dir string) []Dir {
	var paths []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		paths = append([]string{d}, paths...)
		if d == "/" || d == "." {
			break
		}
	}
	out := make([]Dir, 0, len(paths))
	for _, p := range paths {
		d := Dir{Path: p}
		fi, err := os.Stat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			d.Missing = true
		case err != nil:
			d.Err = err
		default:
			d.Mode = fi.Mode()
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				d.UID, d.GID = int(st.Uid), int(st.Gid)
			}
		}
		out = append(out, d)
	}
	return out
}

// lookupGroup resolves socket_group (a name or a gid), as the shim does.
func lookupGroup(name string) Group {
	if name == "" {
		return Group{GID: -1}
	}
	if gid, err := strconv.Atoi(name); err == nil && gid >= 0 {
		return Group{Name: name, GID: gid}
	}
	g, err := user.LookupGroup(name)
	if err != nil {
		return Group{Name: name, Err: err}
	}
	gid, err := strconv.Atoi(g.Gid)
	return Group{Name: name, GID: gid, Err: err}
}
