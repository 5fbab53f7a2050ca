package server

import (
	"strings"
	"sync/atomic"
	"testing"

	nriapi "github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/nriplugin"
	"github.com/cri-nstarget/cri-nstarget/oci"
	"github.com/cri-nstarget/cri-nstarget/pins"
)

// newPluginRig is a rig in the plugin mode: the fake containerd's CRI and
// API, the kernel's side faked, and the plugin's NRI side driven by the
// test itself (its socket leads nowhere).
func newPluginRig(t testing.TB, strict bool) (*rig, *pluginMode) {
	t.Helper()
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	r := buildRigMode(t, strict, nriplugin.New("/nonexistent/nri.sock", logrus.NewEntry(log), nil), true)
	return r, r.server.plugin
}

// debugCtr is the NRI event's copy of a container containerd makes with its
// PID namespace at path ("" for a new one).
func debugCtr(path string) *nriapi.Container {
	return &nriapi.Container{Id: "dbg", PodSandboxId: "sb", Name: "debug",
		Linux: &nriapi.LinuxContainer{Namespaces: []*nriapi.LinuxNamespace{{Type: "pid", Path: path}, {Type: "ipc", Path: "/proc/77/ns/ipc"}}}}
}

var nriPod = &nriapi.PodSandbox{Id: "sb", Name: "web", Namespace: "shop", Uid: "0d6c"}

// pidPath is the PID namespace path an adjustment sets; "(none)" when it
// sets none (and leaves containerd's).
func pidPath(adj *nriapi.ContainerAdjustment) string {
	for _, n := range adj.GetLinux().GetNamespaces() {
		if n.GetType() == "pid" {
			return n.GetPath()
		}
	}
	return "(none)"
}

// The plugin mode's answer to containerd's event for a TARGET container
// (its PID namespace the target's /proc/<pid>/ns/pid): the pin, when that
// pid is a running container of the same pod that containerd confirms;
// otherwise the container is left as containerd made it, its record saying
// why, or refused in strict mode. The record is the proxy's, with the mode.
func TestPluginModeCreate(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		synced  []*nriapi.Container // what NRI told
		backend string              // the target's pod in containerd, "" none
		pid     string              // containerd's path's pid
		taskErr error               // containerd's word on the target's task
		taskPID uint32              // containerd's pid for it, if not 4242
		want    string              // "targeted", or the fallback's reason kind
	}{
		{desc: "the pod's running container with that pid", synced: []*nriapi.Container{running("app", "sb", 4242)}, backend: "sb", pid: "4242", want: "targeted"},
		{desc: "not told by NRI yet: containerd's word", backend: "sb", pid: "4242", want: "targeted"},
		{desc: "another pod's container has that pid", synced: []*nriapi.Container{running("app", "sb2", 4242)}, backend: "sb2", pid: "4242", want: "pid_not_in_pod"},
		{desc: "no container has that pid", synced: []*nriapi.Container{running("app", "sb", 4242)}, backend: "sb", pid: "999", want: "pid_not_in_pod"},
		{desc: "NRI's pid is stale: containerd says the target is not running", synced: []*nriapi.Container{running("app", "sb", 4242)}, backend: "sb",
			pid: "4242", taskErr: taskStatusError{}, want: "target_not_running"},
		{desc: "NRI's pid is stale: containerd's pid for the target is another", synced: []*nriapi.Container{running("app", "sb", 4242)}, backend: "sb",
			pid: "4242", taskPID: 4243, want: "pid_not_in_pod"},
	} {
		for _, strict := range []bool{false, true} {
			t.Run(tc.desc+map[bool]string{true: "/strict"}[strict], func(t *testing.T) {
				r, m := newPluginRig(t, strict)
				posted := &sink{}
				r.events = posted
				if tc.backend != "" {
					r.addTarget("app", tc.backend, runtimeapi.ContainerState_CONTAINER_RUNNING)
				}
				r.tasks.err = tc.taskErr
				if tc.taskPID != 0 {
					r.tasks.pid = tc.taskPID
				}
				m.Synchronized([]*nriapi.PodSandbox{nriPod}, tc.synced)
				adj, err := m.Create(nriPod, debugCtr("/proc/"+tc.pid+"/ns/pid"))
				if tc.want != "targeted" && strict {
					if err == nil || codeOf(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), tc.want) || adj != nil ||
						!strings.Contains(err.Error(), "without strict_targeting it would be left as containerd made it") {
						t.Fatalf("strict: %v, %v; want a refusal, FailedPrecondition, saying %s", adj, err, tc.want)
					}
					if r.pinned("dbg") {
						t.Error("strict: a refused create left its pin")
					}
					return
				}
				if err != nil {
					t.Fatalf("answer: %v", err)
				}
				rec, ok, err := oci.ParseRecord(adj.GetAnnotations())
				ns := rec.Namespaces["pid"]
				if !ok || err != nil || rec.Mode != ModePlugin || rec.Via != ViaNRI || rec.Pod == nil || rec.Pod.Name != "web" {
					t.Fatalf("record %+v (%v, %v): want the plugin mode's, through NRI, naming the pod", rec, ok, err)
				}
				if tc.want == "targeted" {
					if ns.Result != oci.Targeted || pidPath(adj) != "/pins/dbg/pid" || !r.pinned("dbg") || rec.Target != "app" {
						t.Errorf("record %+v, pid path %q, pinned %v: want targeted at the pin of app", rec, pidPath(adj), r.pinned("dbg"))
					}
					if es := posted.posted(); len(es) != 0 {
						t.Errorf("events at create %+v: want none (Targeted is said once it is seen joined)", es)
					}
					return
				}
				if ns.Result != oci.Fallback || ns.ReasonKind != tc.want || pidPath(adj) != "(none)" || r.pinned("dbg") {
					t.Errorf("pid record %+v, pid path %q, pinned %v: want containerd's path left, reason %s, no pin", ns, pidPath(adj), r.pinned("dbg"), tc.want)
				}
				if ns.PodPath != "/proc/"+tc.pid+"/ns/pid" {
					t.Errorf("record's path %q: want containerd's, /proc/%s/ns/pid", ns.PodPath, tc.pid)
				}
				es := posted.posted()
				if len(es) != 1 || es[0].Reason != eventFallback || !es[0].Warning || es[0].Container != "debug" ||
					!strings.Contains(es[0].Message, "left as containerd made it, in the PID namespace containerd pointed it at (/proc/"+tc.pid+"/ns/pid), unpinned") {
					t.Errorf("events %+v: want one Warning TargetingFallback saying the container is left to containerd", es)
				}
			})
		}
	}
}

// The answer to a container NRI told of with its cgroups path asks
// containerd nothing while containerd waits for it: the target, its pod
// and its pid are NRI's word, and the pid is confirmed by /proc once the
// target's namespaces are opened through a pidfd (openConfirmed). A
// target NRI told of without a cgroups path, or found through containerd's
// CRI (not told yet), is confirmed by containerd's word: asked once, after
// the pidfd.
func TestPluginModeCreateAsksContainerd(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		synced []*nriapi.Container
		want   int32
	}{
		{desc: "told with its cgroups path", synced: []*nriapi.Container{runningIn("app", "sb", 4242, "/kubepods/pod1/app")}, want: 0},
		{desc: "told without a cgroups path", synced: []*nriapi.Container{running("app", "sb", 4242)}, want: 1},
		{desc: "not told: containerd's CRI", want: 1},
	} {
		r, m := newPluginRig(t, false)
		r.addTarget("app", "sb", runtimeapi.ContainerState_CONTAINER_RUNNING)
		asked := countAsks(r, 4242)
		m.Synchronized([]*nriapi.PodSandbox{nriPod}, tc.synced)
		before := asked() // the CRI's lookup of a target not told of asks for its pid too
		adj, err := m.Create(nriPod, debugCtr("/proc/4242/ns/pid"))
		if err != nil || pidPath(adj) != "/pins/dbg/pid" || !r.pinned("dbg") {
			t.Fatalf("%s: answer %v, %v: want the pin of app", tc.desc, adj, err)
		}
		if tc.synced == nil {
			before++ // procs.find's TaskPID of the pod's running container
		}
		if n := asked() - before; n != tc.want {
			t.Errorf("%s: asked containerd to confirm the target's pid %d times: want %d", tc.desc, n, tc.want)
		}
	}
}

// countAsks makes containerd's word on a task's pid pid, and counts the
// times it is asked for it.
func countAsks(r *rig, pid uint32) func() int32 {
	var asked atomic.Int32
	r.tasks.answer = func() (uint32, error) { asked.Add(1); return pid, nil }
	return asked.Load
}

// A container whose PID namespace names no other process's is not the
// plugin mode's: no answer, nothing opened.
func TestPluginModeLeavesOthers(t *testing.T) {
	for _, path := range []string{"", "/proc/self/ns/pid", "/proc/0/ns/pid", "/proc/12/ns/ipc", "/var/run/netns/x", "/proc/12/ns/pid/.."} {
		r, m := newPluginRig(t, true)
		r.addTarget("app", "sb", runtimeapi.ContainerState_CONTAINER_RUNNING)
		m.Synchronized(nil, []*nriapi.Container{running("app", "sb", 12)})
		if adj, err := m.Create(nriPod, debugCtr(path)); adj != nil || err != nil || len(r.opened) != 0 {
			t.Errorf("pid namespace %q: answered %v, %v, opened %v; want nothing", path, adj, err, r.opened)
		}
	}
}

// NRI's Synchronize (the plugin's start, containerd's restart) keeps the
// pins of the containers containerd still has and releases the others'; a
// RemoveContainer releases the container's.
func TestPluginModePinsFollowContainerd(t *testing.T) {
	r, m := newPluginRig(t, false)
	for _, id := range []string{"kept", "gone", "removed"} {
		r.pins.Hold(id, []*namespaces.Handle{{Kind: namespaces.PID}})
	}
	m.Synchronized(nil, []*nriapi.Container{running("kept", "sb", 10), running("removed", "sb", 11)})
	if !r.pinned("kept") || r.pinned("gone") || !r.pinned("removed") {
		t.Errorf("after Synchronize: pinned kept %v, gone %v, removed %v; want kept and removed only", r.pinned("kept"), r.pinned("gone"), r.pinned("removed"))
	}
	m.Removed(&nriapi.Container{Id: "removed", PodSandboxId: "sb"})
	if !r.pinned("kept") || r.pinned("removed") {
		t.Errorf("after RemoveContainer: pinned kept %v, removed %v", r.pinned("kept"), r.pinned("removed"))
	}
}

// createdCtr is the NRI copy of container id of sandbox sb, created and not
// started, its PID namespace at path.
func createdCtr(id, sb, path string) *nriapi.Container {
	return &nriapi.Container{Id: id, PodSandboxId: sb, Name: "debug-" + id, State: nriapi.ContainerState_CONTAINER_CREATED,
		Linux: &nriapi.LinuxContainer{Namespaces: []*nriapi.LinuxNamespace{{Type: "pid", Path: path}}}}
}

// A pin lives as long as the plugin's process: at a synchronization, a
// container created and not started whose spec names a pin of another
// process of the plugin (its predecessor) will fail its start. It gets a
// Warning on its pod saying so, and is released here; a container of this
// process's pins, a started one, or one whose path is no pin, is left.
func TestPluginModePinsLost(t *testing.T) {
	r, m := newPluginRig(t, false)
	posted := &sink{}
	r.events = posted
	m.names, m.self = pins.Through("/run/p/pins", 100), 100
	lost := createdCtr("lost", "sb", "/proc/99/root/run/p/pins/lost/pid")
	mine := createdCtr("mine", "sb", "/proc/100/root/run/p/pins/mine/pid")
	plain := createdCtr("plain", "sb", "/proc/4242/ns/pid")
	started := createdCtr("started", "sb", "/proc/99/root/run/p/pins/started/pid")
	started.State = nriapi.ContainerState_CONTAINER_RUNNING
	for _, id := range []string{"lost", "mine", "started"} {
		r.pins.Hold(id, []*namespaces.Handle{{Kind: namespaces.PID}})
	}
	m.Synchronized([]*nriapi.PodSandbox{nriPod}, []*nriapi.Container{lost, mine, plain, started})
	es := posted.posted()
	if len(es) != 1 || es[0].Reason != eventPinLost || !es[0].Warning || es[0].Container != "debug-lost" || es[0].Pod.Name != "web" ||
		!strings.Contains(es[0].Message, "the pin (/proc/99/root/run/p/pins/lost/pid) was lost with the plugin's process, so the start of debug-lost will fail") ||
		!strings.Contains(es[0].Message, "Run kubectl debug again") {
		t.Errorf("events %+v: want one Warning TargetPinLost on web for debug-lost", es)
	}
	if r.pinned("lost") || !r.pinned("mine") || !r.pinned("started") {
		t.Errorf("pinned lost %v, mine %v, started %v: want lost released, the others kept", r.pinned("lost"), r.pinned("mine"), r.pinned("started"))
	}
}

// What an earlier process of the plugin left in its pins directory is
// released at the start, before any synchronization: those pins went with
// that process's mount namespace (or name its root, which names nothing
// now), and none may pass for a live pin, whatever containerd still has.
func TestPluginModeReleasesEarlierPins(t *testing.T) {
	left := &fakePins{held: map[string]map[namespaces.Kind]string{}}
	left.Hold("running", []*namespaces.Handle{{Kind: namespaces.PID}})
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	r := buildRigEdit(t, false, nriplugin.New("/nonexistent/nri.sock", logrus.NewEntry(log), nil), true, func(d *deps) { d.pins = left })
	r.pins = left
	if r.pinned("running") {
		t.Error("the pin an earlier process left is held after the start")
	}
}

// pidTargeted: a PID namespace path of another process is a target's; the
// pod sandbox's own (a pod sharing its PID namespace), none, or another
// form is not.
func TestPidTargeted(t *testing.T) {
	pod := &nriapi.PodSandbox{Id: "sb", Pid: 100}
	ctr := func(path string) *nriapi.Container {
		return &nriapi.Container{Linux: &nriapi.LinuxContainer{Namespaces: []*nriapi.LinuxNamespace{
			{Type: "ipc"}, {Type: "pid", Path: path}}}}
	}
	for _, c := range []struct {
		path string
		pid  uint32
		ok   bool
	}{
		{"/proc/4242/ns/pid", 4242, true},
		{"/proc/100/ns/pid", 0, false},
		{"", 0, false},
		{"/run/other/pid", 0, false},
		{"/proc/0/ns/pid", 0, false},
	} {
		if pid, ok := pidTargeted(pod, ctr(c.path)); pid != c.pid || ok != c.ok {
			t.Errorf("pidTargeted(pod pid 100, %q) = %d, %v; want %d, %v", c.path, pid, ok, c.pid, c.ok)
		}
	}
}
