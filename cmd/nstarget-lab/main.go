// Command nstarget-lab runs cri-nstarget in front of a private containerd
// with locally built images, for trying the shim out (`run`) and for showing
// what it does (`demo`). It needs root, containerd and runc (make deps).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "run" && os.Args[1] != "demo") {
		fmt.Fprintln(os.Stderr, "usage: nstarget-lab run|demo [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	shim := fs.String("shim", "bin/cri-nstarget", "cri-nstarget binary")
	listen := fs.String("listen", "unix:///run/cri-nstarget/cri.sock", "run: the shim's CRI socket (its directory is the state dir)")
	stateDir := fs.String("state-dir", "", "run: the shim's state dir (default: the socket's directory)")
	crictl := fs.String("crictl", "crictl", "run: the crictl the closing hint names (make run builds the pinned one into bin/)")
	fs.Parse(os.Args[2:])
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "nstarget-lab: needs root (containerd, runc and namespace pins)")
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var err error
	if os.Args[1] == "run" {
		err = runLab(ctx, *shim, *crictl, *listen, *stateDir, fs.Args())
	} else {
		err = demo(ctx, *shim)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "nstarget-lab:", err)
		os.Exit(1)
	}
}

// lab is a private containerd with the test images, and a shim in front.
type lab struct {
	env  *harness.Env
	shim *harness.Shim
}

func startLab(ctx context.Context, binary, shimDir string, flags []string) (*lab, error) {
	bin, err := filepath.Abs(binary)
	if err != nil {
		return nil, err
	}
	fmt.Println("• starting a private containerd (its own root, state and socket under /tmp) ...")
	env, err := harness.Start(ctx, "")
	if err != nil {
		return nil, err
	}
	if err := env.PullImages(ctx, env.Containerd.Endpoint()); err != nil {
		env.Close()
		return nil, err
	}
	fmt.Printf("• starting cri-nstarget in front of it (state dir %s) ...\n", shimDir)
	s, err := harness.StartShim(ctx, bin, shimDir, env.Containerd, flags...)
	if err != nil {
		env.Close()
		return nil, err
	}
	return &lab{env: env, shim: s}, nil
}

func (l *lab) close() error {
	fmt.Println("• tearing down: cri-nstarget, then containerd (pods, shims, mounts, files) ...")
	err := l.shim.Close()
	if m, _ := harness.MountsUnder(l.shim.StateDir()); len(m) > 0 {
		fmt.Println("  pins left mounted:", m)
	}
	os.RemoveAll(l.shim.Dir)
	if cerr := l.env.Close(); cerr != nil && err == nil {
		err = cerr
	}
	return err
}

func runLab(ctx context.Context, binary, crictl, listen, stateDir string, flags []string) error {
	sock := strings.TrimPrefix(listen, "unix://")
	if stateDir == "" {
		stateDir = filepath.Dir(sock)
	}
	if filepath.Join(stateDir, "cri.sock") != sock {
		return fmt.Errorf("--listen must be <state-dir>/cri.sock here (got %s and %s)", listen, stateDir)
	}
	l, err := startLab(ctx, binary, stateDir, flags)
	if err != nil {
		return err
	}
	fmt.Printf(`
cri-nstarget is serving on %s
  backend: containerd %s
  images:  %s and %s (served locally)
  logs:    %s

Try:
  %[6]s --runtime-endpoint %[1]s version
  %[6]s --runtime-endpoint %[1]s images

Ctrl-C stops everything.
`, l.shim.Endpoint(), l.env.Containerd.Endpoint(), l.env.BusyboxImage, l.env.PauseImage, l.shim.LogPath(), crictl)
	<-ctx.Done()
	fmt.Println()
	return l.close()
}
