package server

import (
	"errors"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

func TestCreateWithoutTargetIsUntouched(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		r := newRig(t, false)
		req := createReq("sb1", &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER})
		if _, err := r.create(t, req); err != nil {
			t.Fatal(err)
		}
		if got := r.backend.created[0].GetConfig().GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(); got != runtimeapi.NamespaceMode_CONTAINER {
			t.Errorf("backend got pid %v", got)
		}
		if r.specs.edits != 0 || len(r.adjusted) != 0 || len(r.opened) != 0 {
			t.Errorf("the shim touched a container that asked for no targeting: %d spec edits, adjusted %v, opened %v", r.specs.edits, r.adjusted, r.opened)
		}
	})
}

func TestCreateTargetsPIDAndIPC(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		r := newRig(t, false)
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		id, err := r.create(t, createReq("sb1", &runtimeapi.NamespaceOption{
			Pid: runtimeapi.NamespaceMode_TARGET, Ipc: runtimeapi.NamespaceMode_TARGET, TargetId: "app1"}))
		if err != nil {
			t.Fatal(err)
		}
		got := r.backend.created[0].GetConfig().GetLinux().GetSecurityContext().GetNamespaceOptions()
		if got.GetPid() != runtimeapi.NamespaceMode_POD || got.GetIpc() != runtimeapi.NamespaceMode_POD || got.GetTargetId() != "" {
			t.Errorf("backend got %v, want POD/POD and no target_id", got)
		}
		for _, typ := range []specs.LinuxNamespaceType{specs.PIDNamespace, specs.IPCNamespace} {
			if p, want := r.nsPath(id, typ), "/pins/"+id+"/"+string(typ); p != want {
				t.Errorf("%s path = %q, want the pin %q", typ, p, want)
			}
		}
		rec := r.record(t, id)
		if rec.Target != "app1" {
			t.Errorf("record target = %q", rec.Target)
		}
		pid := rec.Namespaces["pid"]
		if pid.Result != oci.Targeted || pid.PodPath != "/proc/42/ns/pid" || pid.Inode == 0 {
			t.Errorf("pid record = %+v, want targeted, pod path kept, inode set", pid)
		}
		if rec.Namespaces["ipc"].Result != oci.Targeted {
			t.Errorf("ipc record = %+v", rec.Namespaces["ipc"])
		}
	})
}

func TestCreateRefusals(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		for _, tc := range []struct {
			desc   string
			target string
			code   codes.Code
		}{
			{"unknown target", "ghost", codes.NotFound},
			{"target in another pod", "other", codes.FailedPrecondition},
			{"ambiguous prefix", "dup", codes.InvalidArgument},
		} {
			t.Run(tc.desc, func(t *testing.T) {
				for _, strict := range []bool{false, true} {
					r := newRig(t, strict)
					r.addTarget("other", "sb2", runtimeapi.ContainerState_CONTAINER_RUNNING)
					r.addTarget("dup", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
					r.addTarget("dup", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
					_, err := r.create(t, createReq("sb1", pidTarget(tc.target)))
					if status.Code(err) != tc.code {
						t.Fatalf("strict=%v: %v, want %v", strict, err, tc.code)
					}
					if msg := status.Convert(err).Message(); !strings.Contains(msg, "debugger") || !strings.Contains(msg, tc.target) {
						t.Errorf("message %q does not name both containers", msg)
					}
					if r.createdCount() != 0 {
						t.Error("backend was asked to create a container")
					}
				}
			})
		}
	})
}

func TestCreateFallbacks(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		for _, tc := range []struct {
			desc       string
			state      runtimeapi.ContainerState
			taskErr    error
			ns         *runtimeapi.NamespaceOption
			strictCode codes.Code
			reason     string
			kind       reasonKind
		}{
			{"target exited", runtimeapi.ContainerState_CONTAINER_EXITED, nil, pidTarget("app1"), codes.FailedPrecondition, "CONTAINER_EXITED", reasonTargetNotRunning},
			{"target created, not started", runtimeapi.ContainerState_CONTAINER_CREATED, nil, pidTarget("app1"), codes.FailedPrecondition, "not running", reasonTargetNotRunning},
			{"containerd unreachable", runtimeapi.ContainerState_CONTAINER_RUNNING, errContainerdDown, pidTarget("app1"), codes.Unavailable, "code = Unavailable", reasonContainerdUnavailable},
			{"no task", runtimeapi.ContainerState_CONTAINER_RUNNING, errTaskNotRunning, pidTarget("app1"), codes.FailedPrecondition, "target is not running", reasonTargetNotRunning},
			// containerd's metadata has the target (its state unknown there),
			// its task is gone: the target exited.
			{"task not found", runtimeapi.ContainerState_CONTAINER_RUNNING, status.Error(codes.NotFound, "task app1 not found"), pidTarget("app1"), codes.FailedPrecondition, "target is not running", reasonTargetNotRunning},
			{"unknown mode", runtimeapi.ContainerState_CONTAINER_RUNNING, nil, &runtimeapi.NamespaceOption{Pid: 9}, codes.InvalidArgument, "unknown NamespaceMode 9", reasonUnknownMode},
		} {
			t.Run(tc.desc, func(t *testing.T) {
				r := newRig(t, false)
				r.addTarget("app1", "sb1", tc.state)
				r.tasks.err = tc.taskErr
				id, err := r.create(t, createReq("sb1", tc.ns))
				if err != nil {
					t.Fatalf("default mode must fall back, got %v", err)
				}
				if got := r.backend.created[0].GetConfig().GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(); got != runtimeapi.NamespaceMode_POD {
					t.Errorf("backend got pid %v, want POD", got)
				}
				if p := r.nsPath(id, specs.PIDNamespace); p != "/proc/42/ns/pid" {
					t.Errorf("pid path = %q, want the pod's", p)
				}
				fb := r.record(t, id).Namespaces["pid"]
				if fb.Result != oci.Fallback || !strings.Contains(fb.Reason, tc.reason) || fb.ReasonKind != string(tc.kind) {
					t.Errorf("record = %+v, want fallback mentioning %q, kind %s", fb, tc.reason, tc.kind)
				}
				if len(r.pins.held) != 0 {
					t.Errorf("pins held after fallback: %v", r.pins.held)
				}

				r = newRig(t, true)
				r.addTarget("app1", "sb1", tc.state)
				r.tasks.err = tc.taskErr
				_, err = r.create(t, createReq("sb1", tc.ns))
				if status.Code(err) != tc.strictCode || !strings.Contains(err.Error(), tc.reason) {
					t.Errorf("strict: %v, want %v mentioning %q", err, tc.strictCode, tc.reason)
				}
				if r.createdCount() != 0 {
					t.Error("strict: backend was asked to create a container")
				}
			})
		}
	})
}

// TestCreateCleansUpAfterLateFailure: when the spec cannot be rewritten after
// the backend made the container, strict mode removes it and its pins;
// default mode keeps it in the pod's namespaces and releases the pins.
func TestCreateCleansUpAfterLateFailure(t *testing.T) {
	for _, strict := range []bool{true, false} {
		r := newRig(t, strict)
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		r.specs.err = errContainerdDown
		_, err := r.create(t, createReq("sb1", pidTarget("app1")))
		if strict {
			if status.Code(err) != codes.Unavailable {
				t.Errorf("strict: %v, want Unavailable", err)
			}
			if len(r.backend.removed) != 1 || r.backendContainers() != 1 { // the target stays
				t.Errorf("strict: removed %v, %d containers left; want the new one removed", r.backend.removed, r.backendContainers())
			}
		} else if err != nil {
			t.Errorf("default: %v", err)
		}
		if len(r.pins.held) != 0 {
			t.Errorf("strict=%v: pins held: %v", strict, r.pins.held)
		}
	}
}

func TestCreatePinFailureFallsBack(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		r := newRig(t, false)
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		r.pins.err = errors.New("mount: operation not permitted")
		id, err := r.create(t, createReq("sb1", pidTarget("app1")))
		if err != nil {
			t.Fatal(err)
		}
		if fb := r.record(t, id).Namespaces["pid"]; fb.Result != oci.Fallback || !strings.Contains(fb.Reason, "not permitted") {
			t.Errorf("record = %+v", fb)
		}
		if p := r.nsPath(id, specs.PIDNamespace); p != "/proc/42/ns/pid" {
			t.Errorf("pid path = %q, want the pod's", p)
		}
	})
}

func TestCreateVerifiesTaskPID(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		r := newRig(t, false)
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		var calls atomic.Int32
		r.tasks.answer = func() (uint32, error) { return uint32(100 + calls.Add(1)), nil } // the pid moves
		id, err := r.create(t, createReq("sb1", pidTarget("app1")))
		if err != nil {
			t.Fatal(err)
		}
		if fb := r.record(t, id).Namespaces["pid"]; fb.Result != oci.Fallback || !strings.Contains(fb.Reason, "pid changed") {
			t.Errorf("record = %+v, want fallback on a moved pid", fb)
		}
	})
}

// Strict: the pid is confirmed while the backend creates the container, so
// a pid that moved means no container and no pin: on the Update path what
// the backend made is removed; on the NRI path the event's answer refuses,
// and the backend makes nothing.
func TestCreateVerifiesTaskPIDStrict(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		r := newRig(t, true)
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		var calls atomic.Int32
		r.tasks.answer = func() (uint32, error) { return uint32(100 + calls.Add(1)), nil }
		_, err := r.create(t, createReq("sb1", pidTarget("app1")))
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "pid changed") {
			t.Fatalf("strict create with a moved pid = %v, want FailedPrecondition naming the moved pid", err)
		}
		r.backend.mu.Lock()
		created, removed := len(r.backend.created), append([]string(nil), r.backend.removed...)
		r.backend.mu.Unlock()
		want := 1 // made, then removed
		if r.nri != nil {
			want = 0
		}
		if created != want || len(removed) != want || r.backendContainers() != 1 {
			t.Errorf("backend created %d, removed %v, has %d: want the target alone left, %d made and removed", created, removed, r.backendContainers(), want)
		}
		if len(r.pins.held) != 0 {
			t.Errorf("pins held: %v", r.pins.held)
		}
	})
}

// TestSamePodByResolvedIDs: the same-pod check compares resolved ids: a
// unique prefix of the target's sandbox is that sandbox; a prefix that is
// ambiguous, or another sandbox's, is not.
func TestSamePodByResolvedIDs(t *testing.T) {
	r := newRig(t, false)
	r.addTarget("app1", "sandbox-1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	if _, err := r.create(t, createReq("sandbox-1"[:9], pidTarget("app1"))); err != nil {
		t.Errorf("sandbox by unique prefix: %v", err)
	}
	r.addTarget("app2", "sandbox-2", runtimeapi.ContainerState_CONTAINER_RUNNING)
	if _, err := r.create(t, createReq("sandbox-", pidTarget("app1"))); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("sandbox by ambiguous prefix: %v, want FailedPrecondition", err)
	}
	if _, err := r.create(t, createReq("sandbox-2", pidTarget("app1"))); status.Code(err) != codes.FailedPrecondition {
		t.Errorf("target in another sandbox: %v, want FailedPrecondition", err)
	}
}

// IPC TARGET opens the target's /dev/shm with its namespaces; a /dev/shm
// that is not the pod's is pinned and the container's mount points at the
// pin, keeping the backend's options; the record says what is shared.
func TestCreateIPCSharesTargetShm(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		r := newRig(t, false)
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		id, err := r.create(t, createReq("sb1", ipcTarget("app1")))
		if err != nil {
			t.Fatal(err)
		}
		if got := r.opened[len(r.opened)-1]; !slices.Equal(got, []namespaces.Kind{namespaces.IPC, namespaces.Shm}) {
			t.Errorf("opened %v, want ipc and shm", got)
		}
		pin := "/pins/" + id + "/shm"
		if m, _ := r.mount(id, "/dev/shm"); m.Source != pin || m.Type != "bind" || !slices.Equal(m.Options, []string{"rbind", "rprivate", "rw"}) {
			t.Errorf("/dev/shm mount = %+v, want the pin %s with the backend's options", m, pin)
		}
		if p, ok := r.pins.Path(id, namespaces.Shm); !ok || p != pin {
			t.Errorf("shm pin = %q %v", p, ok)
		}
		ipc := r.record(t, id).Namespaces["ipc"]
		if ipc.Result != oci.Targeted || !slices.Equal(ipc.Shares, []string{"sysv", "mqueue", "shm"}) || ipc.Shm != pin || ipc.PodShm != r.specs.podShm().Source || ipc.ShmReason != "" {
			t.Errorf("ipc record = %+v", ipc)
		}
		if _, ok := r.record(t, id).Namespaces["shm"]; ok {
			t.Error("shm recorded as a namespace")
		}
	})
}

// The target's /dev/shm is the pod's (the same directory): nothing changes
// and nothing more is pinned.
func TestCreateIPCTargetShmIsThePods(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		r := newRig(t, false)
		r.specs.shmDir = t.TempDir()
		podShm, err := namespaces.Stat(r.specs.shmDir)
		if err != nil {
			t.Fatal(err)
		}
		open := r.kernel.openNS
		r.kernel.openNS = func(pid int, kinds []namespaces.Kind) ([]*namespaces.Handle, error) {
			hs, err := open(pid, kinds)
			for _, h := range hs {
				if h.Kind == namespaces.Shm {
					h.ID = podShm
				}
			}
			return hs, err
		}
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		id, err := r.create(t, createReq("sb1", ipcTarget("app1")))
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := r.mount(id, "/dev/shm"); m.Source != r.specs.shmDir {
			t.Errorf("/dev/shm mount = %+v, want the pod's", m)
		}
		if _, ok := r.pins.Path(id, namespaces.Shm); ok {
			t.Error("the pod's /dev/shm was pinned")
		}
		if ipc := r.record(t, id).Namespaces["ipc"]; !slices.Equal(ipc.Shares, []string{"sysv", "mqueue", "shm"}) || ipc.Shm != oci.ShmPod {
			t.Errorf("ipc record = %+v", ipc)
		}
	})
}

// The target has no /dev/shm: the namespace is still joined, the record
// says /dev/shm is not shared and why.
func TestCreateIPCTargetWithoutShm(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		r := newRig(t, false)
		open := r.kernel.openNS
		r.kernel.openNS = func(pid int, kinds []namespaces.Kind) ([]*namespaces.Handle, error) {
			return open(pid, slices.DeleteFunc(slices.Clone(kinds), func(k namespaces.Kind) bool { return k == namespaces.Shm }))
		}
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		id, err := r.create(t, createReq("sb1", ipcTarget("app1")))
		if err != nil {
			t.Fatal(err)
		}
		if ipc := r.record(t, id).Namespaces["ipc"]; ipc.Result != oci.Targeted || !slices.Equal(ipc.Shares, []string{"sysv", "mqueue"}) || ipc.Shm != "" || !strings.Contains(ipc.ShmReason, "no /dev/shm") {
			t.Errorf("ipc record = %+v", ipc)
		}
		if m, _ := r.mount(id, "/dev/shm"); m.Source != r.specs.podShm().Source {
			t.Errorf("/dev/shm mount = %+v, want the pod's", m)
		}
	})
}

// The namespace pins fail after the spec was pointed at the target's
// /dev/shm: the fallback restores the pod's mount with the namespaces.
func TestCreateIPCPinFailureRestoresShm(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		r := newRig(t, false)
		r.pins.holdErr = errors.New("mount: operation not permitted")
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		id, err := r.create(t, createReq("sb1", ipcTarget("app1")))
		if err != nil {
			t.Fatal(err)
		}
		if m, _ := r.mount(id, "/dev/shm"); m.Source != r.specs.podShm().Source || m.Type != "bind" {
			t.Errorf("/dev/shm mount = %+v, want the pod's back", m)
		}
		if p := r.nsPath(id, specs.IPCNamespace); p != "/proc/42/ns/ipc" {
			t.Errorf("ipc path = %q, want the pod's", p)
		}
		if ipc := r.record(t, id).Namespaces["ipc"]; ipc.Result != oci.Fallback {
			t.Errorf("ipc record = %+v", ipc)
		}
		if r.pinned(id) {
			t.Error("pins left")
		}
	})
}

// A user-namespaced pod: the join is checked against the user namespace the
// backend put in the spec. Where the kernel would refuse it, the default
// shim falls back to the pod's namespace and says why, keeping no pin; a
// strict shim refuses with FailedPrecondition and removes what the backend made.
func TestCreateUsernsJoin(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		for _, tc := range []struct {
			name    string
			strict  bool
			canJoin bool
		}{
			{"joinable", false, true},
			{"refused", false, false},
			{"refused strict", true, false},
		} {
			t.Run(tc.name, func(t *testing.T) {
				r := newRig(t, tc.strict)
				r.specs.userns = "/proc/77/ns/user"
				var asked []string
				r.kernel.canJoin = func(h *namespaces.Handle, userns string) (bool, error) {
					asked = append(asked, string(h.Kind)+" from "+userns)
					return tc.canJoin, nil
				}
				r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
				id, err := r.create(t, createReq("sb1", pidTarget("app1")))
				if want := []string{"pid from /proc/77/ns/user"}; !slices.Equal(asked, want) {
					t.Errorf("asked %v, want %v", asked, want)
				}
				switch {
				case tc.strict:
					if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "refuse the join") {
						t.Fatalf("strict create = %v, want FailedPrecondition saying the kernel would refuse the join", err)
					}
					if n := r.backendContainers(); n != 1 { // the target only
						t.Errorf("backend holds %d containers, want the target only", n)
					}
				case err != nil:
					t.Fatal(err)
				case tc.canJoin:
					if p := r.nsPath(id, specs.PIDNamespace); p != "/pins/"+id+"/pid" {
						t.Errorf("pid path = %q, want the pin", p)
					}
				default:
					pid := r.record(t, id).Namespaces["pid"]
					if pid.Result != oci.Fallback || !strings.Contains(pid.Reason, "user namespace") {
						t.Errorf("pid record = %+v, want a fallback naming the user namespace", pid)
					}
					if p := r.nsPath(id, specs.PIDNamespace); p != "/proc/42/ns/pid" {
						t.Errorf("pid path = %q, want the pod's", p)
					}
				}
				if !tc.canJoin && r.pinned(id) {
					t.Error("pins kept for a namespace nothing joins")
				}
			})
		}
	})
}
