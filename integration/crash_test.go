//go:build integration

package integration

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// The steps of a TARGET create at which a shim built with the tag
// failpoints stops (server/failpoint_on.go).
var createSteps = []string{"create:recorded", "create:forwarded", "create:finished"}

var (
	failpointBinOnce sync.Once
	failpointBin     string
	failpointErr     error
)

// failpointShim builds (once) the shim with its failpoints compiled in.
func failpointShim(t *testing.T) string {
	t.Helper()
	failpointBinOnce.Do(func() {
		root, _ := filepath.Abs("..")
		failpointBin, failpointErr = harness.BuildShim(root, tmp, "failpoints")
	})
	if failpointErr != nil {
		t.Fatal(failpointErr)
	}
	return failpointBin
}

// TestCrashDuringTargetCreate kills the shim (SIGKILL) at each step of a
// pid-TARGET CreateContainer, alone or together with a containerd restart,
// restarts it, and retries the same request, as kubelet does (same name,
// same attempt). The retry must succeed and target, and nothing may be
// orphaned: no container but the app and the retried one, no pin but the
// retried one's, no intent record.
//
// On a backend with NRI the targeting is written in containerd's own
// CreateContainer, and one more step is crashed at: while the shim answers
// the NRI event. There, containerd gives up on the plugin and makes the
// container with the pod's namespaces; no client ever receives it (the
// shim died before answering), it is never started, and the restarted shim
// removes it before it serves. The retry is targeted through NRI, with no
// spec Update.
func TestCrashDuringTargetCreate(t *testing.T) {
	bin := failpointShim(t)
	steps := createSteps
	if shimsUseNRI() {
		steps = append([]string{"create:recorded", "create:nri-event"}, createSteps[1:]...)
	}
	for _, step := range steps {
		for _, withContainerd := range []bool{false, true} {
			name := step
			if withContainerd {
				name += "+containerd-restart"
			}
			t.Run(name, func(t *testing.T) { crashAt(t, bin, step, withContainerd) })
		}
	}
}

func crashAt(t *testing.T, bin, step string, restartContainerd bool) {
	marks := t.TempDir()
	t.Setenv("CRI_NSTARGET_FAILPOINT", step)
	t.Setenv("CRI_NSTARGET_FAILPOINT_DIR", marks)
	s := startShimBinary(t, bin)
	c := shimCRI(s)
	p := runPod(t, c, ownMode)
	app := run(t, c, p, "app", pidOwn)
	req := &runtimeapi.CreateContainerRequest{PodSandboxId: p.id, SandboxConfig: p.cfg, Config: &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: "debug", Attempt: 0},
		Image:    &runtimeapi.ImageSpec{Image: env.BusyboxImage},
		Command:  []string{"sleep", "3600"},
		Linux:    &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: targetOf(app)}},
	}}

	answered := make(chan error, 1)
	go func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, err := c.Runtime.CreateContainer(cctx, req)
		answered <- err
	}()
	reached := filepath.Join(marks, "failpoint-reached")
	eventually(t, "the shim to stop at "+step, func() bool { _, err := os.Stat(reached); return err == nil })
	s.Kill()
	if err := <-answered; status.Code(err) != codes.Unavailable {
		t.Fatalf("the create cut by the crash answered %v, want Unavailable", err)
	}
	if step == "create:nri-event" {
		// what containerd made without the shim's answer: not started
		for id := range containerIDs(t) {
			st, err := direct.Runtime.ContainerStatus(ctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
			if err == nil && id != app && st.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_CREATED &&
				st.GetStatus().GetMetadata().GetName() == "debug" {
				t.Errorf("container %s made while the shim was dead is %v", id, st.GetStatus().GetState())
			}
		}
	}
	if restartContainerd {
		if err := env.Containerd.Restart(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("CRI_NSTARGET_FAILPOINT", "") // the restarted shim runs through
	if err := s.Start(ctx(t)); err != nil {
		t.Fatal(err)
	}

	resp, err := c.Runtime.CreateContainer(ctx(t), req)
	if err != nil {
		t.Fatalf("retry of the same CreateContainer after a crash at %s: %v", step, err)
	}
	dbg := resp.GetContainerId()
	// before the start, whose check writes what it saw into the record
	updated := specUpdated(t, dbg)
	mustStart(t, c, dbg)
	if got, want := nsInside(t, c, dbg, "pid"), nsInside(t, c, app, "pid"); got != want {
		t.Errorf("retried debug container in pid namespace %s, want the app's %s", got, want)
	}
	if r := direct.Info(t, dbg).Record(t).Namespaces["pid"]; r.Result != oci.Targeted {
		t.Errorf("retried debug container's record: %+v, want targeted", r)
	}
	if shimsUseNRI() {
		if rec := direct.Info(t, dbg).Record(t); rec.Via != "nri" || updated {
			t.Errorf("retried debug container: via %q, updated after create %v; want through NRI, no Update", rec.Via, updated)
		}
	}

	// nothing orphaned
	inPod, err := direct.Runtime.ListContainers(ctx(t), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: p.id}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, ct := range inPod.GetContainers() {
		ids = append(ids, ct.GetId())
	}
	sort.Strings(ids)
	want := []string{app, dbg}
	sort.Strings(want)
	if strings.Join(ids, " ") != strings.Join(want, " ") {
		t.Errorf("containers in the pod: %v, want only the app and the retried debug container %v", ids, want)
	}
	if pins, _ := os.ReadDir(filepath.Join(s.StateDir(), "pins")); len(pins) != 1 || pins[0].Name() != dbg {
		t.Errorf("pin directories: %v, want only %s", names(pins), dbg)
	}
	if m := mountsUnder(t, filepath.Join(s.StateDir(), "pins")); len(m) != 1 {
		t.Errorf("pins mounted: %v, want the retried container's pid pin only", m)
	}
	if recs, _ := os.ReadDir(filepath.Join(s.StateDir(), "intents")); len(recs) != 0 {
		t.Errorf("intent records left: %v", names(recs))
	}
}

func names(es []os.DirEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name())
	}
	return out
}
