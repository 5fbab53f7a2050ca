package installer

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path"
	"slices"
	"strconv"

	"github.com/cri-nstarget/cri-nstarget/config"
	"github.com/cri-nstarget/cri-nstarget/installer/kubelet"
)

// plan is what an install will do on this node, decided before it changes
// anything.
type plan struct {
	edit    kubelet.Edit
	socket  string // the shim's endpoint (its config's listen)
	shimRun string // its state_dir
	backend string // the kubelet's endpoint now: containerd's
	config  []byte // the config to write; nil: the node has one
}

// errRefused marks what inspect finds wrong with the node: nothing was
// changed, and nothing will be.
type errRefused struct{ reason string }

func (e errRefused) Error() string { return e.reason }

func refusef(format string, a ...any) error { return errRefused{fmt.Sprintf(format, a...)} }

// inspect reads the node and decides the plan, or refuses. st is the
// install's state so far: files it lists are this installer's own.
func (in *Installer) inspect(ctx context.Context, st State) (plan, error) {
	cd, err := in.o.Systemd.Unit(ctx, in.o.ContainerdUnit)
	if err != nil {
		return plan{}, err
	}
	if cd.LoadState != "loaded" || cd.ActiveState != "active" {
		return plan{}, refusef("%s is %s (%s): cri-nstarget runs in front of containerd", in.o.ContainerdUnit, cd.ActiveState, cd.LoadState)
	}
	kn, l, err := in.readKubelet(ctx)
	if err != nil {
		return plan{}, err
	}
	p, err := in.shimConfig(st, kn, l)
	if err != nil {
		return plan{}, err
	}
	if err := in.checkRuntime(ctx, l, p.socket); err != nil {
		return plan{}, err
	}
	if err := in.checkOtherInstall(ctx, st); err != nil {
		return plan{}, err
	}
	if p.edit, err = kubelet.Point(kn, l, p.socket); err != nil {
		return plan{}, refusef("the kubelet's layout: %v", err)
	}
	return p, nil
}

// shimConfig is the plan's shim: the node's own configuration file when
// it has one this installer did not write (its backend must be the
// kubelet's), else the defaults in front of the kubelet's endpoint, to be
// written.
func (in *Installer) shimConfig(st State, kn kubelet.Node, l kubelet.Layout) (plan, error) {
	p := plan{backend: l.Endpoint}
	cfgData, haveCfg, err := readHost(in.o.Root, ConfigPath)
	if err != nil {
		return plan{}, err
	}
	if haveCfg && !created(st, ConfigPath) {
		cfg, err := config.Decode(ConfigPath, cfgData)
		if err != nil {
			return plan{}, refusef("the node's %v", err)
		}
		p.socket, p.shimRun = cfg.Listen, cfg.StateDir
		same, err := in.sameSocket(cfg.RuntimeEndpoint, l.Endpoint)
		if err != nil {
			return plan{}, err
		}
		if !same {
			return plan{}, refusef("%s sends the shim to %s, but the kubelet uses %s: make them the same, or remove the file", ConfigPath, cfg.RuntimeEndpoint, l.Endpoint)
		}
		return p, nil
	}
	cfg := config.Default()
	sock, err := socketPath(l.Endpoint)
	if err != nil {
		return plan{}, refusef("the kubelet's runtime endpoint %s: want a unix socket", l.Endpoint)
	}
	cfg.RuntimeEndpoint, cfg.ContainerdAddress = l.Endpoint, sock
	cfg.EventsKubeconfig = eventsKubeconfig(kn.Argv)
	if p.config, err = cfg.Marshal(); err != nil {
		return plan{}, err
	}
	p.socket, p.shimRun = cfg.Listen, cfg.StateDir
	return p, nil
}

// checkRuntime refuses a kubelet already on the shim's socket, or whose
// runtime is not containerd answering the CRI.
func (in *Installer) checkRuntime(ctx context.Context, l kubelet.Layout, shimSocket string) error {
	onShim, err := in.sameSocket(l.Endpoint, shimSocket)
	if err != nil {
		return err
	}
	if onShim {
		return refusef("the kubelet already uses the shim's socket %s, and this installer did not put it there (cri-nstarget's package, or by hand): remove that install first", shimSocket)
	}
	name, version, err := in.o.CRI.Runtime(ctx, in.socket(l.Endpoint))
	if err != nil {
		return refusef("the kubelet's runtime at %s does not answer the CRI: %v", l.Endpoint, err)
	}
	if name != "containerd" {
		return refusef("the kubelet's runtime at %s is %s %s: cri-nstarget runs in front of containerd", l.Endpoint, name, version)
	}
	return nil
}

// checkOtherInstall refuses another install of the shim: the package's
// unit, or files this installer did not write.
func (in *Installer) checkOtherInstall(ctx context.Context, st State) error {
	u, err := in.o.Systemd.Unit(ctx, UnitName)
	if err != nil {
		return err
	}
	if u.LoadState == "loaded" && u.Files.FragmentPath != UnitPath {
		return refusef("%s is already installed from %s (cri-nstarget's package, or by hand): remove it first, or keep it and leave this node out", UnitName, u.Files.FragmentPath)
	}
	for _, f := range []string{UnitPath, in.binPath()} {
		if hostExists(in.o.Root, f) && !created(st, f) {
			return refusef("%s exists and this installer did not write it: remove it first, or leave this node out", f)
		}
	}
	return nil
}

// readKubelet reads the running kubelet: its unit, its command line and
// the place its endpoint is set.
func (in *Installer) readKubelet(ctx context.Context) (kubelet.Node, kubelet.Layout, error) {
	u, err := in.o.Systemd.Unit(ctx, in.o.KubeletUnit)
	if err != nil {
		return kubelet.Node{}, kubelet.Layout{}, err
	}
	if u.LoadState != "loaded" || u.ActiveState != "active" || u.MainPID == 0 {
		return kubelet.Node{}, kubelet.Layout{}, refusef("%s is %s (%s, pid %d): the kubelet must run under systemd", in.o.KubeletUnit, u.ActiveState, u.LoadState, u.MainPID)
	}
	argv, err := in.cmdline(u.MainPID)
	if err != nil {
		return kubelet.Node{}, kubelet.Layout{}, err
	}
	if path.Base(argv[0]) != "kubelet" {
		return kubelet.Node{}, kubelet.Layout{}, refusef("%s runs %s, not a kubelet binary (an embedded kubelet, k3s or the like, is not supported)", in.o.KubeletUnit, argv[0])
	}
	n, err := kubelet.Read(in.o.Root, argv, u.Files)
	if err != nil {
		return kubelet.Node{}, kubelet.Layout{}, refusef("%v", err)
	}
	l, err := kubelet.Find(n)
	if err != nil {
		return kubelet.Node{}, kubelet.Layout{}, refusef("the kubelet's layout: %v", err)
	}
	return n, l, nil
}

// cmdline is the host's /proc/PID/cmdline.
func (in *Installer) cmdline(pid int) ([]string, error) {
	b, err := os.ReadFile(in.hostPath("/proc/" + strconv.Itoa(pid) + "/cmdline"))
	if err != nil {
		return nil, fmt.Errorf("read the kubelet's command line: %w", err)
	}
	args := bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0})
	if len(args) == 0 || len(args[0]) == 0 {
		return nil, fmt.Errorf("the kubelet's command line (pid %d) is empty", pid)
	}
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = string(a)
	}
	return out, nil
}

// socket is the path of a unix:// endpoint as the installer sees it (an
// endpoint that is not one is returned as it is, and fails when used).
func (in *Installer) socket(endpoint string) string {
	p, err := socketPath(endpoint)
	if err != nil {
		return endpoint
	}
	return in.hostPath(p)
}

// sameSocket says whether two endpoints name the same socket on the host
// (/var/run is /run, say), or the same path when neither exists.
func (in *Installer) sameSocket(a, b string) (bool, error) {
	pa, err := socketPath(a)
	if err != nil {
		return false, refusef("%v", err)
	}
	pb, err := socketPath(b)
	if err != nil {
		return false, refusef("%v", err)
	}
	if pa == pb {
		return true, nil
	}
	fa, errA := os.Stat(in.hostPath(pa))
	fb, errB := os.Stat(in.hostPath(pb))
	if errA != nil || errB != nil {
		return false, nil
	}
	return os.SameFile(fa, fb), nil
}

func created(st State, p string) bool {
	return slices.ContainsFunc(st.Created, func(c Created) bool { return c.Path == p })
}
