package server

import (
	"errors"
	"os/exec"
	"strings"
	"testing"

	nriapi "github.com/containerd/nri/pkg/api"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

const ctrID = "4f1c0e8a9d2b7c6e5f4a3b2c1d0e9f8a7b6c5d4e3f2a1b0c9d8e7f6a5b4c3d2e"

// A cgroup path names a container's id as runc and containerd write it,
// cgroupfs or systemd, cgroup v1 or v2, seen from a cgroup namespace or
// not; never a longer hex run that holds it, nor another id.
func TestNamesID(t *testing.T) {
	for _, tc := range []struct {
		path string
		want bool
	}{
		{"/kubepods/besteffort/pod0d6c/" + ctrID, true}, // cgroupfs
		{"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod0d6c.slice/cri-containerd-" + ctrID + ".scope", true}, // systemd
		{"kubepods-besteffort-pod0d6c.slice:cri-containerd:" + ctrID, true},                                                      // NRI's, systemd driver
		{"/../../pod0d6c/" + ctrID, true}, // in a cgroup namespace
		{"/" + ctrID + "/sub", true},      // moved below its own
		{"/", false},
		{"", false},
		{"/kubepods/besteffort/pod0d6c/" + ctrID[:63], false},
		{"/kubepods/besteffort/pod0d6c/" + ctrID + "0", false},
		{"/kubepods/besteffort/pod0d6c/a" + ctrID, false},
		{"/kubepods/besteffort/pod0d6c/cri-containerd-" + strings.Replace(ctrID, "4f", "4e", 1) + ".scope", false},
	} {
		if got := namesID(tc.path, ctrID); got != tc.want {
			t.Errorf("namesID(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
	if namesID("/kubepods/x", "") {
		t.Error("an empty id is named by any path")
	}
}

// Whether a process is a container's init, as /proc tells it: in a cgroup
// naming the container (any of the hierarchies), and pid 1 of its
// innermost PID namespace; a cgroup that does not name it is another
// process; no NSpid, or not pid 1 there, is not to be told by /proc.
func TestInitOf(t *testing.T) {
	own := "/kubepods/pod0d6c/" + ctrID
	for _, tc := range []struct {
		desc    string
		who     namespaces.Identity
		refused bool
		told    bool
	}{
		{desc: "its init", who: namespaces.Identity{Cgroups: []string{own}, NSpid: []int{4242, 1}}, told: true},
		{desc: "its init, cgroup v1, one hierarchy names it", who: namespaces.Identity{Cgroups: []string{"/", own}, NSpid: []int{4242, 1}}, told: true},
		{desc: "a process of another container", who: namespaces.Identity{Cgroups: []string{"/kubepods/pod0d6c/other"}, NSpid: []int{4242, 1}}, refused: true, told: true},
		{desc: "a host process", who: namespaces.Identity{Cgroups: []string{"/system.slice/cron.service"}, NSpid: []int{4242}}, refused: true, told: true},
		{desc: "not its PID namespace's init: a pod sharing one", who: namespaces.Identity{Cgroups: []string{own}, NSpid: []int{4242, 7}}},
		{desc: "a kernel without NSpid", who: namespaces.Identity{Cgroups: []string{own}}},
	} {
		err, told := initOf(ctrID, 4242, tc.who)
		var not *notTargetError
		if told != tc.told || errors.As(err, &not) != tc.refused || (err != nil && !tc.refused) {
			t.Errorf("%s: %v, told %v; want refused %v, told %v", tc.desc, err, told, tc.refused, tc.told)
		}
	}
}

// runningIn is NRI's copy of a running container with its cgroups path.
func runningIn(id, sandbox string, pid uint32, cgroups string) *nriapi.Container {
	c := running(id, sandbox, pid)
	c.Linux = &nriapi.LinuxContainer{CgroupsPath: cgroups}
	return c
}

// A target NRI told of with its cgroups path is confirmed by /proc: a
// process that is its init is pinned without asking containerd; one that
// is not (a stale pid, reused) is refused by /proc even when containerd's
// word, stale too, still names that pid: pid_not_in_pod, as a pid that
// changed; /proc that cannot tell leaves it to containerd's word.
func TestPluginModeLocalConfirmation(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		who     namespaces.Identity
		taskPID uint32 // containerd's word on the target's pid
		want    string
		asked   int32
	}{
		{desc: "its init", who: namespaces.Identity{Cgroups: []string{"/kubepods/pod1/app"}, NSpid: []int{4242, 1}}, taskPID: 4242, want: "targeted"},
		{desc: "a process of another container, containerd's word stale", who: namespaces.Identity{Cgroups: []string{"/kubepods/pod1/other"}, NSpid: []int{4242, 1}},
			taskPID: 4242, want: "pid_not_in_pod"},
		{desc: "a host process, containerd's word stale", who: namespaces.Identity{Cgroups: []string{"/user.slice"}, NSpid: []int{4242}},
			taskPID: 4242, want: "pid_not_in_pod"},
		{desc: "not told by /proc: containerd's word, the same pid", who: namespaces.Identity{Cgroups: []string{"/kubepods/pod1/app"}, NSpid: []int{4242, 7}},
			taskPID: 4242, want: "targeted", asked: 1},
		{desc: "not told by /proc: containerd's word, another pid", who: namespaces.Identity{Cgroups: []string{"/kubepods/pod1/app"}, NSpid: []int{4242, 7}},
			taskPID: 4243, want: "pid_not_in_pod", asked: 1},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r, m := newPluginRig(t, false)
			r.addTarget("app", "sb", runtimeapi.ContainerState_CONTAINER_RUNNING)
			r.identity = func(int) namespaces.Identity { return tc.who }
			asked := countAsks(r, tc.taskPID)
			m.Synchronized([]*nriapi.PodSandbox{nriPod}, []*nriapi.Container{runningIn("app", "sb", 4242, "/kubepods/pod1/app")})
			adj, err := m.Create(nriPod, debugCtr("/proc/4242/ns/pid"))
			checkPIDResult(t, r, adj, err, tc.want)
			if n := asked(); n != tc.asked {
				t.Errorf("asked containerd for the target's pid %d times, want %d", n, tc.asked)
			}
		})
	}
}

// checkPIDResult fails unless the answer targets (want "targeted": the
// pin of dbg) or falls back with the reason kind want (no pin).
func checkPIDResult(t *testing.T, r *rig, adj *nriapi.ContainerAdjustment, err error, want string) {
	t.Helper()
	if err != nil {
		t.Fatalf("answer: %v", err)
	}
	rec, _, _ := oci.ParseRecord(adj.GetAnnotations())
	ns := rec.Namespaces["pid"]
	switch {
	case want == "targeted" && (ns.Result != oci.Targeted || pidPath(adj) != "/pins/dbg/pid" || !r.pinned("dbg")):
		t.Errorf("record %+v, pid path %q: want the pin of app", ns, pidPath(adj))
	case want != "targeted" && (ns.Result != oci.Fallback || ns.ReasonKind != want || r.pinned("dbg") || pidPath(adj) != "(none)"):
		t.Errorf("record %+v, pid path %q, pinned %v: want no pin, reason %s", ns, pidPath(adj), r.pinned("dbg"), want)
	}
}

// A real process in the test's own cgroup, whose pid NRI's index gives as
// the target's and containerd's word (stale) agrees with: /proc, read
// through a pidfd of it, shows it is not the target's init, and nothing is
// pinned.
func TestPluginModeLocalConfirmationRealProcess(t *testing.T) {
	sleep := exec.Command("sleep", "60")
	if err := sleep.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sleep.Process.Kill(); sleep.Wait() })
	pid := uint32(sleep.Process.Pid)
	r, m := newPluginRig(t, false)
	r.kernel.openNS, r.kernel.openIdentified = namespaces.Open, namespaces.OpenIdentified
	r.addTarget(ctrID, "sb", runtimeapi.ContainerState_CONTAINER_RUNNING)
	asked := countAsks(r, pid)
	m.Synchronized([]*nriapi.PodSandbox{nriPod}, []*nriapi.Container{runningIn(ctrID, "sb", pid, "/kubepods/pod1/"+ctrID)})
	adj, err := m.Create(nriPod, debugCtr(procPIDPath(pid)))
	checkPIDResult(t, r, adj, err, "pid_not_in_pod")
	if n := asked(); n != 0 {
		t.Errorf("asked containerd %d times: want none, /proc told", n)
	}
}
