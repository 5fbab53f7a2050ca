//go:build integration

package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/cri-nstarget/cri-nstarget/internal/critesting"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

var (
	env        *harness.Env
	shimBin    string
	tmp        string           // short dir for shim sockets and state
	direct     critesting.CRI   // containerd's own CRI, bypassing the shim
	directConn *grpc.ClientConn // its connection
)

func TestMain(m *testing.M) {
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "integration: skipped, these tests need root (containerd, runc, bind mounts)")
		os.Exit(0)
	}
	os.Exit(runSuite(m))
}

func runSuite(m *testing.M) (code int) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var err error
	if tmp, err = os.MkdirTemp("/tmp", "nsi-"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer func() {
		// Last resort: every test checks its own pins; anything still mounted
		// here is a leak, reported and then cleaned so the machine is left as found.
		if leaked, _ := harness.MountsUnder(tmp); len(leaked) > 0 {
			fmt.Fprintln(os.Stderr, "integration: mounts leaked under", tmp, leaked)
			code = 1
			if err := harness.UnmountAll(tmp); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
		os.RemoveAll(tmp)
	}()
	root, _ := filepath.Abs("..")
	if shimBin, err = harness.BuildShim(root, tmp); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	probe, err := harness.BuildIPCProbe(root, tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	nojoin, err := harness.BuildNojoinRuntime(root, tmp, "")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if env, err = harness.StartWith(ctx, harness.EnvOptions{BusyboxFiles: []harness.File{probe}, Runtimes: []harness.Runtime{
		{Name: nojoinHandler, BinaryName: nojoin}}}); err != nil {
		fmt.Fprintln(os.Stderr, "start containerd:", err)
		return 1
	}
	defer func() {
		if err := env.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "stop containerd:", err)
		}
	}()
	if err := env.PullImages(ctx, env.Containerd.Endpoint()); err != nil {
		fmt.Fprintln(os.Stderr, err, "\n", env.Containerd.LogTail())
		return 1
	}
	conn, err := harness.Dial(env.Containerd.Endpoint())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer conn.Close()
	direct, directConn = critesting.New(conn), conn
	code = m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, "containerd log tail:\n", env.Containerd.LogTail())
	}
	return code
}
