//go:build integration

package integration

import (
	"os"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// (f) RemoveContainer and RemovePodSandbox release pins; a restarted shim
// releases the pins of containers removed while it was down.
func TestPinsReleased(t *testing.T) {
	s := startShim(t)
	c := shimCRI(s)
	pins := s.StateDir() + "/pins"

	t.Run("RemoveContainer", func(t *testing.T) {
		p := runPod(t, c, ownMode)
		app := run(t, c, p, "app", pidOwn)
		dbg := run(t, c, p, "debug", &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, Ipc: runtimeapi.NamespaceMode_TARGET, TargetId: app})
		if m := mountsUnder(t, pins); len(m) != 2 {
			t.Fatalf("pins after create = %v, want pid and ipc", m)
		}
		if _, err := c.Runtime.StopContainer(ctx(t), &runtimeapi.StopContainerRequest{ContainerId: dbg}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Runtime.RemoveContainer(ctx(t), &runtimeapi.RemoveContainerRequest{ContainerId: dbg}); err != nil {
			t.Fatal(err)
		}
		if m := mountsUnder(t, pins); len(m) != 0 {
			t.Errorf("pins after RemoveContainer: %v", m)
		}
		if _, err := os.Stat(pins + "/" + dbg); !os.IsNotExist(err) {
			t.Errorf("pin directory left: %v", err)
		}
	})

	t.Run("RemovePodSandbox", func(t *testing.T) {
		p := runPod(t, c, ownMode)
		app := run(t, c, p, "app", pidOwn)
		run(t, c, p, "debug", targetOf(app))
		mustCreate(t, c, p, "debug2", targetOf(app))
		if m := mountsUnder(t, pins); len(m) != 2 {
			t.Fatalf("pins = %v, want two", m)
		}
		stopPod(t, c, p.id)
		if _, err := c.Runtime.RemovePodSandbox(ctx(t), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.id}); err != nil {
			t.Fatal(err)
		}
		if m := mountsUnder(t, pins); len(m) != 0 {
			t.Errorf("pins after RemovePodSandbox: %v", m)
		}
	})

	t.Run("stale pins after a crash", func(t *testing.T) {
		p := runPod(t, c, ownMode)
		app := run(t, c, p, "app", pidOwn)
		dbg := mustCreate(t, c, p, "debug", targetOf(app))
		keep := mustCreate(t, c, p, "debug-kept", targetOf(app))
		s.Kill()
		// removed behind the shim's back
		if _, err := direct.Runtime.RemoveContainer(ctx(t), &runtimeapi.RemoveContainerRequest{ContainerId: dbg}); err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx(t)); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the stale pin to be released", func() bool { return len(mountsUnder(t, pins+"/"+dbg)) == 0 })
		if m := mountsUnder(t, pins+"/"+keep); len(m) != 1 {
			t.Errorf("pin of the container that still exists: %v, want kept", m)
		}
		mustStart(t, c, keep) // still joins the target after the restart
		if got, want := nsInside(t, c, keep, "pid"), nsInside(t, c, app, "pid"); got != want {
			t.Errorf("after shim restart: pid namespace %s, want the app's %s", got, want)
		}
		stopPod(t, c, p.id)
		if _, err := c.Runtime.RemovePodSandbox(ctx(t), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.id}); err != nil {
			t.Fatal(err)
		}
		if m := mountsUnder(t, pins); len(m) != 0 {
			t.Errorf("pins left: %v", m)
		}
	})
}
