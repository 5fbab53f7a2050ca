//go:build integration

package integration

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// containerd dies under the shim: calls fail with Unavailable (never
// Internal, never a hang), and once containerd is back the shim serves again
// by itself, targeting included.
func TestContainerdRestart(t *testing.T) {
	s := startShim(t)
	c := shimCRI(s)
	p := runPod(t, c, ownMode)
	app := run(t, c, p, "app", pidOwn)

	if err := env.Containerd.Kill(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	t.Cleanup(func() {
		if !restarted {
			env.Containerd.Restart(context.Background())
		}
	})
	calls := map[string]func(context.Context) error{
		"Version": func(ctx context.Context) error {
			_, err := c.Runtime.Version(ctx, &runtimeapi.VersionRequest{})
			return err
		},
		"ListImages": func(ctx context.Context) error {
			_, err := c.Images.ListImages(ctx, &runtimeapi.ListImagesRequest{})
			return err
		},
		"CreateContainer TARGET": func(ctx context.Context) error {
			_, err := createIn(t, c, p, "debug-outage", targetOf(app))
			return err
		},
	}
	for name, call := range calls {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		start := time.Now()
		err := call(cctx)
		cancel()
		if status.Code(err) != codes.Unavailable {
			t.Errorf("%s during the outage: %v, want Unavailable", name, err)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%s during the outage took %v: it should fail fast", name, d)
		}
	}

	down := time.Now()
	if err := env.Containerd.Restart(ctx(t)); err != nil {
		t.Fatal(err)
	}
	restarted = true
	up := time.Now()
	eventually(t, "the shim to serve again", func() bool {
		_, err := c.Runtime.Version(ctx(t), &runtimeapi.VersionRequest{})
		return err == nil
	})
	t.Logf("containerd down %v; shim serving %v after containerd was back", up.Sub(down).Round(time.Millisecond), time.Since(up).Round(time.Millisecond))
	eventually(t, "containerd's own CRI to answer the test client", func() bool {
		_, err := direct.Runtime.Version(ctx(t), &runtimeapi.VersionRequest{})
		return err == nil
	})

	dbg := run(t, c, p, "debug", targetOf(app))
	if got, want := nsInside(t, c, dbg, "pid"), nsInside(t, c, app, "pid"); got != want {
		t.Errorf("after the restart: debug pid namespace %s, want the app's %s", got, want)
	}
}

// SIGTERM: a call in flight finishes, the socket is removed, the process
// exits cleanly; started again, the shim serves at once.
func TestShimSIGTERM(t *testing.T) {
	s := startShim(t)
	c := shimCRI(s)
	p := runPod(t, c, podMode)
	app := run(t, c, p, "app", &runtimeapi.NamespaceOption{})

	done := make(chan error, 1)
	go func() {
		resp, err := c.Runtime.ExecSync(context.Background(), &runtimeapi.ExecSyncRequest{ContainerId: app, Cmd: []string{"sh", "-c", "sleep 2; echo finished"}, Timeout: 30})
		if err == nil && strings.TrimSpace(string(resp.GetStdout())) != "finished" {
			err = status.Errorf(codes.Unknown, "exec output %q", resp.GetStdout())
		}
		done <- err
	}()
	time.Sleep(500 * time.Millisecond) // the exec is in flight
	stopped := time.Now()
	if err := s.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	if err := <-done; err != nil {
		t.Errorf("call in flight at SIGTERM: %v, want it finished", err)
	}
	t.Logf("shim exited %v after SIGTERM, having finished the call in flight", time.Since(stopped).Round(time.Millisecond))
	if _, err := os.Stat(s.Socket()); !os.IsNotExist(err) {
		t.Errorf("socket left after a clean stop: %v", err)
	}
	start := time.Now()
	if err := s.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}
	t.Logf("restarted shim serving after %v", time.Since(start).Round(time.Millisecond))
}

// A socket file left by a crash does not stop start-up; a socket another
// shim still serves does, with a clear error.
func TestSocketAtStartup(t *testing.T) {
	s := startShim(t)
	s.Kill()
	if fi, err := os.Stat(s.Socket()); err != nil || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("after SIGKILL the socket file should remain: %v", err)
	}
	if err := s.Start(ctx(t)); err != nil {
		t.Fatalf("start over a stale socket: %v", err)
	}
	if fi, err := os.Stat(s.Socket()); err != nil || fi.Mode().Perm() != 0o660 {
		t.Errorf("socket mode = %v, %v; want 0660", fi.Mode().Perm(), err)
	}
	if fi, err := os.Stat(s.StateDir()); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state dir mode = %v, %v; want 0700", fi.Mode().Perm(), err)
	}

	out, err := exec.Command(s.Binary, s.Args...).CombinedOutput()
	if err == nil {
		t.Fatal("a second shim ran on a socket that is being served")
	}
	if !strings.Contains(string(out), "another process serves this socket") {
		t.Errorf("second shim said %q; want it to say the socket is in use", out)
	}
	if _, err := s.Runtime.Version(ctx(t), &runtimeapi.VersionRequest{}); err != nil {
		t.Errorf("the first shim stopped serving: %v", err)
	}
}

// --socket-group gives the socket (0660) to a group; it must live outside
// the 0700 state dir, and a shim asked otherwise refuses to start. It works
// under the systemd unit's own capability set, and CAP_CHOWN in that set is
// what it needs: without it, the shim refuses to start and says why.
func TestSocketGroup(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatal("setpriv (util-linux) is missing")
	}
	unitCaps := unitBoundingSet(t)
	dir := filepath.Join(tmp, "sg")
	state, sock := filepath.Join(dir, "state"), filepath.Join(dir, "cri.sock")
	args := []string{"--config=", "--state-dir", state, "--runtime-endpoint", env.Containerd.Endpoint(),
		"--containerd-address", env.Containerd.Address(), "--socket-group", "4242"}
	// as the unit runs it: its bounding set, no inheritable capabilities,
	// no_new_privs
	withCaps := func(caps []string, args ...string) *exec.Cmd {
		bounding := "-all"
		for _, c := range caps {
			bounding += ",+" + c
		}
		return exec.Command("setpriv", append([]string{"--bounding-set", bounding, "--inh-caps", "-all", "--no-new-privs", "--", shimBin}, args...)...)
	}
	cmd := withCaps(unitCaps, append(args, "--listen", "unix://"+sock)...)
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }()
	eventually(t, "the socket", func() bool { _, err := os.Stat(sock); return err == nil })
	fi, err := os.Stat(sock)
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); fi.Mode().Perm() != 0o660 || st.Uid != 0 || st.Gid != 4242 {
		t.Errorf("under the unit's capabilities %v: socket mode %v uid %d gid %d; want 0660 root:4242", unitCaps, fi.Mode().Perm(), st.Uid, st.Gid)
	}
	if fi, err := os.Stat(state); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("state dir: %v %v; want 0700", fi.Mode().Perm(), err)
	}

	var noChown []string
	for _, c := range unitCaps {
		if c != "chown" {
			noChown = append(noChown, c)
		}
	}
	out, err := withCaps(noChown, append(args, "--listen", "unix://"+filepath.Join(dir, "nochown.sock"))...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "operation not permitted") {
		t.Errorf("socket group without CAP_CHOWN (%v): %v %q, want a refusal to start", noChown, err, out)
	}

	out, err = exec.Command(shimBin, append(args, "--listen", "unix://"+filepath.Join(state, "in.sock"))...).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "cannot reach a socket inside state_dir") {
		t.Errorf("socket group with the socket in the state dir: %v %q", err, out)
	}
}
