//go:build integration

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	containersapi "github.com/containerd/containerd/api/services/containers/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/critesting"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/nriplugin"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// nriTooOld is set on legs whose containerd serves NRI in a version that
// cannot adjust namespaces (containerd 2.0 and 2.1: NRI v0.8; the shim
// needs v0.10), so the shims take the Update path there: make sets
// NSTARGET_EXPECT_VIA=update on them (integration-containerd-2.0).
// TestNRITooOldForNamespaces checks that the shim does so.
var nriTooOld = os.Getenv("NSTARGET_EXPECT_VIA") == "update"

// requireNRI skips t, saying why, when the backend has no NRI (containerd
// 1.6) or its NRI cannot adjust namespaces (nriTooOld); with
// NSTARGET_REQUIRE_NRI=1 (the containerd 2.4 and 2.3 legs) it fails t.
func requireNRI(t *testing.T) {
	t.Helper()
	v, _ := direct.Runtime.Version(ctx(t), &runtimeapi.VersionRequest{})
	var why string
	if _, err := os.Stat(env.Containerd.NRISocket()); err != nil {
		why = fmt.Sprintf("%s %s serves no NRI socket at %s", v.GetRuntimeName(), v.GetRuntimeVersion(), env.Containerd.NRISocket())
	} else if nriTooOld {
		why = fmt.Sprintf("%s %s serves NRI, but a version that cannot adjust namespaces: the shim takes the Update path here (NSTARGET_EXPECT_VIA=update; TestNRITooOldForNamespaces)",
			v.GetRuntimeName(), v.GetRuntimeVersion())
	} else {
		return
	}
	if os.Getenv("NSTARGET_REQUIRE_NRI") == "1" {
		t.Fatal(why)
	}
	t.Skip(why)
}

// requireNRIShims is requireNRI, and skips t when the shims are forced
// onto the Update path (NSTARGET_SHIM_FLAGS).
func requireNRIShims(t *testing.T) {
	t.Helper()
	requireNRI(t)
	if !shimsUseNRI() {
		t.Skip("the shims are forced onto the Update path (NSTARGET_SHIM_FLAGS)")
	}
}

// nriConnections is how many times shim s has logged taking the NRI path.
func nriConnections(s *harness.Shim) int {
	b, _ := os.ReadFile(s.LogPath())
	return strings.Count(string(b), `msg="targeting path" via=nri`)
}

// shimsUseNRI: the backend has NRI that adjusts namespaces, and the shims
// are not forced onto the Update path (NSTARGET_SHIM_FLAGS).
func shimsUseNRI() bool {
	_, err := os.Stat(env.Containerd.NRISocket())
	return err == nil && !nriTooOld && !strings.Contains(os.Getenv("NSTARGET_SHIM_FLAGS"), "update")
}

// specUpdated tells whether containerd's stored container was updated after
// it was made: containerd sets UpdatedAt at every Update. Asked before the
// container's start: the check after it writes what it saw into the record,
// an Update.
func specUpdated(t *testing.T, id string) bool {
	t.Helper()
	conn, err := harness.Dial(env.Containerd.Endpoint())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cctx := metadata.AppendToOutgoingContext(ctx(t), "containerd-namespace", "k8s.io")
	resp, err := containersapi.NewContainersClient(conn).Get(cctx, &containersapi.GetContainerRequest{ID: id})
	if err != nil {
		t.Fatal(err)
	}
	c := resp.GetContainer()
	return !c.GetUpdatedAt().AsTime().Equal(c.GetCreatedAt().AsTime())
}

// On containerd with NRI, a pid TARGET create is pointed at the pin inside
// containerd's own CreateContainer: the debug container sees the app's
// processes, the record says via nri, and containerd's stored container was
// never updated. Forced onto the Update path (--targeting-via update), the
// same create is updated after it was made.
func TestNRITargeting(t *testing.T) {
	requireNRI(t)
	for _, tc := range []struct {
		via     string
		flags   []string
		updated bool
	}{
		{"nri", nil, false},
		{"update", []string{"--targeting-via", "update"}, true},
	} {
		t.Run(tc.via, func(t *testing.T) {
			s := startShim(t, tc.flags...)
			c := shimCRI(s)
			p := runPod(t, c, ownMode)
			app := run(t, c, p, "app", pidOwn, "sleep", "3608")
			dbg := mustCreate(t, c, p, "debug", targetOf(app))
			// before the start, whose check writes what it saw into the record
			updated := specUpdated(t, dbg)
			mustStart(t, c, dbg)
			if ps := execIn(t, c, dbg, "ps", "-o", "pid,args"); !strings.Contains(ps, "sleep 3608") {
				t.Errorf("debug container does not see the app's process:\n%s", ps)
			}
			ci := direct.Info(t, dbg)
			pin := s.StateDir() + "/pins/" + dbg + "/pid"
			rec := ci.Record(t)
			if rec.Via != tc.via || rec.Namespaces["pid"].Result != oci.Targeted || nsPath(ci, "pid") != pin {
				t.Errorf("record %+v, spec pid path %q: want targeted via %s through %s", rec, nsPath(ci, "pid"), tc.via, pin)
			}
			if got := ci.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(); got != runtimeapi.NamespaceMode_POD {
				t.Errorf("containerd received pid mode %v, want POD", got)
			}
			if updated != tc.updated {
				t.Errorf("containerd's container updated after create: %v, want %v", updated, tc.updated)
			}
		})
	}
}

// On containerd 2.0 (NRI v0.8, without namespace adjustments) the shim
// registers with NRI, turns it down saying why, and targets through the
// Update path: the debug container sees the app's processes, the record
// says via update, and containerd's stored container was updated after it
// was made. It does not register again within the next seconds (it did,
// every second, each time taking containerd's plugin-sync lock and being
// sent every pod and container).
func TestNRITooOldForNamespaces(t *testing.T) {
	if _, err := os.Stat(env.Containerd.NRISocket()); err != nil || !nriTooOld {
		t.Skip("for a backend that serves NRI without namespace adjustments (NSTARGET_EXPECT_VIA=update and an NRI socket: make integration-containerd-2.0)")
	}
	registrations := func() int {
		b, _ := os.ReadFile(env.Containerd.LogPath())
		n := 0
		for _, l := range strings.Split(string(b), "\n") {
			if strings.Contains(l, "synchronizing plugin") && strings.Contains(l, nriplugin.PluginName) {
				n++
			}
		}
		return n
	}
	before := registrations()
	started := time.Now()
	s := startShim(t)
	c := shimCRI(s)
	p := runPod(t, c, ownMode)
	app := run(t, c, p, "app", pidOwn, "sleep", "3641")
	dbg := mustCreate(t, c, p, "debug", targetOf(app))
	updated := specUpdated(t, dbg) // before the start, whose check updates the record
	mustStart(t, c, dbg)
	if ps := execIn(t, c, dbg, "ps", "-o", "pid,args"); !strings.Contains(ps, "sleep 3641") {
		t.Errorf("debug container does not see the app's process:\n%s", ps)
	}
	if rec := direct.Info(t, dbg).Record(t); rec.Via != "update" || rec.Namespaces["pid"].Result != oci.Targeted || !updated {
		t.Errorf("record %+v, updated after create %v: want targeted via update", rec, updated)
	}
	log, _ := os.ReadFile(s.LogPath())
	if !regexp.MustCompile(`msg="targeting path" via=update why="the runtime's NRI version \\"v0\.[0-9]\.[0-9]+\\" cannot adjust namespaces`).Match(log) {
		t.Errorf("the shim's log does not say it takes the Update path because the runtime's NRI is too old:\n%s", log)
	}
	time.Sleep(time.Until(started.Add(4 * time.Second)))
	if n := registrations() - before; n != 1 {
		t.Errorf("containerd synchronized the shim's NRI plugin %d times in 4 s, want once", n)
	}
}

// Many creates in flight at once through NRI, TARGET ones (each pod's debug
// container targets its own pod's app) and plain ones: each gets its own
// adjustment, or none.
func TestNRIConcurrentCreates(t *testing.T) {
	requireNRI(t)
	s := startShim(t)
	c := shimCRI(s)
	const pods = 3
	type podApp struct {
		p   pod
		app string
	}
	var pa []podApp
	for i := 0; i < pods; i++ {
		p := runPod(t, c, ownMode)
		pa = append(pa, podApp{p, run(t, c, p, "app", pidOwn, "sleep", fmt.Sprint(3610+i))})
	}
	type made struct {
		pod    int
		target string
		id     string
		err    error
	}
	var (
		mu  sync.Mutex
		out []made
		wg  sync.WaitGroup
	)
	for i := 0; i < pods; i++ {
		for j, ns := range []*runtimeapi.NamespaceOption{targetOf(pa[i].app), pidOwn, targetOf(pa[i].app), podModeOpt()} {
			wg.Add(1)
			go func(i, j int, ns *runtimeapi.NamespaceOption) {
				defer wg.Done()
				id, err := createIn(t, c, pa[i].p, fmt.Sprintf("c%d", j), ns)
				mu.Lock()
				out = append(out, made{i, ns.GetTargetId(), id, err})
				mu.Unlock()
			}(i, j, ns)
		}
	}
	wg.Wait()
	for _, m := range out {
		if m.err != nil {
			t.Fatalf("create in pod %d: %v", m.pod, m.err)
		}
		ci := direct.Info(t, m.id)
		rec, has := ci.RuntimeSpec.Annotations[oci.AnnotationTargeting]
		if m.target == "" {
			if has {
				t.Errorf("plain container %s got a targeting record: %s", m.id, rec)
			}
			if p := nsPath(ci, "pid"); strings.Contains(p, "/pins/") {
				t.Errorf("plain container %s points at a pin: %s", m.id, p)
			}
			continue
		}
		r := ci.Record(t)
		if pin := s.StateDir() + "/pins/" + m.id + "/pid"; r.Target != m.target || r.Via != "nri" || nsPath(ci, "pid") != pin {
			t.Errorf("debug container %s (pod %d): record %+v, pid path %q; want its own pin %s and target %s", m.id, m.pod, r, nsPath(ci, "pid"), pin, m.target)
		}
		if specUpdated(t, m.id) {
			t.Errorf("debug container %s was updated after create", m.id)
		}
	}
	for _, m := range out {
		if m.target == "" {
			continue
		}
		mustStart(t, c, m.id)
		if got, want := nsInside(t, c, m.id, "pid"), nsInside(t, c, m.target, "pid"); got != want {
			t.Errorf("debug container %s in pid namespace %s, want its target's %s", m.id, got, want)
		}
	}
}

func podModeOpt() *runtimeapi.NamespaceOption {
	return &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_POD}
}

// Through NRI, a pin that cannot be made (here the pins directory is a
// file) is a fallback written in containerd's CreateContainer, and in strict
// mode a refusal: containerd makes nothing, and the caller gets
// FailedPrecondition.
func TestNRIPinFailure(t *testing.T) {
	requireNRI(t)
	for _, strict := range []bool{false, true} {
		t.Run(fmt.Sprintf("strict=%v", strict), func(t *testing.T) {
			s := startShimStrict(t, strict)
			c := shimCRI(s)
			p := runPod(t, c, ownMode)
			app := run(t, c, p, "app", pidOwn)
			pins := s.StateDir() + "/pins"
			os.Remove(pins)
			if err := os.WriteFile(pins, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.Remove(pins) })
			before := containerIDs(t)
			dbg, err := createIn(t, c, p, "debug", targetOf(app))
			if strict {
				refusedLeavingNothing(t, err, before, "pin")
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			ci := direct.Info(t, dbg)
			r := ci.Record(t)
			if pid := r.Namespaces["pid"]; pid.Result != oci.Fallback || r.Via != "nri" || strings.Contains(nsPath(ci, "pid"), "/pins/") {
				t.Errorf("record %+v, pid path %q: want a fallback written through NRI, the pod's namespace", r, nsPath(ci, "pid"))
			}
			if specUpdated(t, dbg) {
				t.Error("the fallback was written by an Update")
			}
		})
	}
}

// Another vendor's NRI plugin (NRI's template plugin, hack/nri-sample) sets
// the pid namespace of the same debug container. NRI lets one plugin adjust
// a field and fails a create that two adjust, whichever order they run in
// (the sample registers before the shim, index 10, and after it, 90). The
// other plugin wins: the default shim falls back (the record says so, and
// the container is in the namespace the other plugin chose); a strict shim
// refuses with FailedPrecondition, and containerd holds nothing.
func TestNRIAnotherPluginSetsTheNamespace(t *testing.T) {
	requireNRIShims(t)
	sample := buildNRISample(t)
	for _, idx := range []string{"10", "90"} {
		for _, strict := range []bool{false, true} {
			t.Run(fmt.Sprintf("idx=%s,strict=%v", idx, strict), func(t *testing.T) {
				stop := runNRISample(t, sample, idx)
				defer stop()
				s := startShimStrict(t, strict)
				c := shimCRI(s)
				p := runPod(t, c, ownMode)
				app := run(t, c, p, "app", pidOwn)
				podPID := fmt.Sprintf("/proc/%d/ns/pid", sandboxPid(t, p.id))
				before := containerIDs(t)
				dbg, err := createCfg(t, c, p, &runtimeapi.ContainerConfig{
					Metadata:    &runtimeapi.ContainerMetadata{Name: "debug"},
					Command:     []string{"sleep", "3600"},
					Annotations: map[string]string{"nri-sample.cri-nstarget.test/pid-namespace": podPID},
					Linux:       &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: targetOf(app)}},
				})
				if strict {
					refusedLeavingNothing(t, err, before, "another NRI plugin")
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				ci := direct.Info(t, dbg)
				r := ci.Record(t)
				if pid := r.Namespaces["pid"]; pid.Result != oci.Fallback || !strings.Contains(pid.Reason, "another NRI plugin") {
					t.Errorf("pid record %+v, want a fallback saying another NRI plugin won", pid)
				}
				if got := nsPath(ci, "pid"); got != podPID {
					t.Errorf("spec pid path %q, want the other plugin's %q", got, podPID)
				}
				if mounts := mountsUnder(t, s.StateDir()); len(mounts) != 0 {
					t.Errorf("pins left for a container that joins none: %v", mounts)
				}
			})
		}
	}
}

func buildNRISample(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(tmp, "nri-sample")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	cmd := exec.Command("go", "build", "-o", bin, ".")
	cmd.Dir = filepath.Join("..", "hack", "nri-sample")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build hack/nri-sample: %v\n%s", err, out)
	}
	return bin
}

// runNRISample runs the sample plugin against the test's containerd until
// stop, and waits until containerd has it (it logs its registration).
func runNRISample(t *testing.T, bin, idx string) (stop func()) {
	t.Helper()
	logPath := filepath.Join(t.TempDir(), "nri-sample.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-name", "nri-sample", "-idx", idx, "-socket", env.Containerd.NRISocket())
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stop = func() {
		cmd.Process.Kill()
		cmd.Wait()
		logf.Close()
	}
	eventually(t, "the sample NRI plugin to register", func() bool {
		b, _ := os.ReadFile(env.Containerd.LogPath())
		return strings.Contains(string(b), idx+"-nri-sample")
	})
	return stop
}

// A containerd whose NRI validator refuses namespace adjustments
// (default_validator.reject_namespace_adjustment): the first TARGET create
// through NRI is refused by containerd, the shim learns it, creates again
// through the Update path (the caller sees one create that targets), and
// takes the Update path from then on.
func TestNRINamespaceAdjustmentRefused(t *testing.T) {
	requireNRIShims(t)
	e, err := harness.StartWith(ctx(t), harness.EnvOptions{NRIValidator: "enable = true\nreject_namespace_adjustment = true"})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if err := e.PullImages(ctx(t), e.Containerd.Endpoint()); err != nil {
		t.Fatal(err)
	}
	s, err := harness.StartShim(ctx(t), shimBin, filepath.Join(tmp, "refused"), e.Containerd)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c := shimCRI(s)
	sb := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "refused", Uid: fmt.Sprint("uid-refused-", os.Getpid()), Namespace: "nst"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: ownMode}}},
	}
	ps, err := c.Runtime.RunPodSandbox(ctx(t), &runtimeapi.RunPodSandboxRequest{Config: sb})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		c.Runtime.StopPodSandbox(ctx(t), &runtimeapi.StopPodSandboxRequest{PodSandboxId: ps.GetPodSandboxId()})
		c.Runtime.RemovePodSandbox(ctx(t), &runtimeapi.RemovePodSandboxRequest{PodSandboxId: ps.GetPodSandboxId()})
	}()
	create := func(name string, ns *runtimeapi.NamespaceOption) string {
		t.Helper()
		r, err := c.Runtime.CreateContainer(ctx(t), &runtimeapi.CreateContainerRequest{PodSandboxId: ps.GetPodSandboxId(), SandboxConfig: sb,
			Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: name}, Image: &runtimeapi.ImageSpec{Image: e.BusyboxImage},
				Command: []string{"sleep", "3600"}, Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}}}})
		if err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
		mustStart(t, c, r.GetContainerId())
		return r.GetContainerId()
	}
	via := func(id string) oci.Record {
		t.Helper()
		st, err := c.Runtime.ContainerStatus(ctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
		if err != nil {
			t.Fatal(err)
		}
		var ci critesting.ContainerInfo
		if err := json.Unmarshal([]byte(st.GetInfo()["info"]), &ci); err != nil {
			t.Fatal(err)
		}
		return ci.Record(t)
	}
	app := create("app", pidOwn)
	for _, name := range []string{"debug-1", "debug-2"} {
		dbg := create(name, targetOf(app))
		if got, want := nsInside(t, c, dbg, "pid"), nsInside(t, c, app, "pid"); got != want {
			t.Errorf("%s in pid namespace %s, want the app's %s", name, got, want)
		}
		if r := via(dbg); r.Via != "update" || r.Namespaces["pid"].Result != oci.Targeted {
			t.Errorf("%s: record %+v, want targeted via update", name, r)
		}
	}
	b, _ := os.ReadFile(s.LogPath())
	if n := strings.Count(string(b), "refused the NRI namespace adjustment"); n != 1 {
		t.Errorf("the shim tried NRI %d times against a runtime that refuses it, want once:\n%s", n, b)
	}
}

// containerd restarting closes the NRI connection: the shim takes the
// Update path meanwhile, connects again by itself, and targets through NRI
// again.
func TestNRIReconnectsAfterContainerdRestart(t *testing.T) {
	requireNRIShims(t)
	s := startShim(t)
	c := shimCRI(s)
	if n := nriConnections(s); n != 1 {
		t.Fatalf("the shim logged the NRI path %d times at start, want once", n)
	}
	if err := env.Containerd.Restart(ctx(t)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the shim to connect to NRI again", func() bool { return nriConnections(s) == 2 })
	b, _ := os.ReadFile(s.LogPath())
	if !strings.Contains(string(b), `msg="targeting path" via=update why="the NRI connection was lost"`) {
		t.Errorf("the lost connection was not logged:\n%s", b)
	}
	p := runPod(t, c, ownMode)
	app := run(t, c, p, "app", pidOwn)
	dbg := run(t, c, p, "debug", targetOf(app))
	if r := direct.Info(t, dbg).Record(t); r.Via != "nri" || r.Namespaces["pid"].Result != oci.Targeted {
		t.Errorf("after containerd's restart: record %+v, want targeted via nri", r)
	}
}

// containerd 2.x takes its NRI plugin-sync lock for reading in
// RemovePodSandbox, and again in the RemoveContainer that RemovePodSandbox
// calls for each of the pod's containers. A plugin that registers meanwhile
// asks for the lock for writing; the nested read then waits for it, and it
// for the outer read: containerd's CRI hangs for good. The shim registers
// again after every containerd restart. Pods removed through it, back to
// back, while it does so must all go, and it must be on the NRI path again.
func TestNRIRegistrationDuringPodRemoval(t *testing.T) {
	requireNRIShims(t)
	s := startShim(t)
	c := shimCRI(s)
	const n = 10
	pods := make([]pod, n)
	for i := range pods {
		pods[i] = runPod(t, c, ownMode)
		run(t, c, pods[i], "app", pidOwn)
	}
	if err := env.Containerd.Restart(ctx(t)); err != nil {
		t.Fatal(err)
	}
	// the shim connects to NRI again within nriRetry (a second) of losing
	// it; the removals, some 300 ms each, span that moment. Until the
	// shim's own connection to containerd is back out of its reconnect
	// backoff, a call fails fast with Unavailable, as kubelet's would
	// directly: retried, as kubelet does, so the removals start at once.
	start := time.Now()
	unavailable := 0
	for i, p := range pods {
		var err error
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			cctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			_, err = c.Runtime.RemovePodSandbox(cctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: p.id})
			cancel()
			if status.Code(err) != codes.Unavailable || time.Now().After(deadline) {
				break
			}
			unavailable++
		}
		if err != nil {
			t.Fatalf("RemovePodSandbox of pod %d of %d, %v after containerd's restart: %v\ncontainerd's log:\n%s",
				i+1, n, time.Since(start).Round(time.Millisecond), err, env.Containerd.LogTail())
		}
	}
	t.Logf("%d pods removed in %v after containerd's restart (%d calls answered Unavailable while the shim reconnected, retried)",
		n, time.Since(start).Round(time.Millisecond), unavailable)
	eventually(t, "the shim to connect to NRI again", func() bool { return nriConnections(s) == 2 })
	b, _ := os.ReadFile(s.LogPath())
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, "waited") && strings.Contains(l, "NRI") {
			t.Logf("shim: %s", l)
		}
	}
}

// refusedLeavingNothing checks a strict shim's refusal of a create:
// FailedPrecondition saying why (want), and containerd holding exactly the
// containers it held before.
func refusedLeavingNothing(t *testing.T, err error, before map[string]bool, want string) {
	t.Helper()
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), want) {
		t.Fatalf("strict create = %v, want FailedPrecondition about %q", err, want)
	}
	if after := containerIDs(t); !maps.Equal(after, before) {
		t.Errorf("containerd holds %v, held %v: the refused create left something", after, before)
	}
}
