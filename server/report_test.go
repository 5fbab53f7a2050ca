package server

import (
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/events"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// TestCreateStepsLogged: at debug level a targeted create says where its
// time went, step by step, on both paths.
func TestCreateStepsLogged(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig func(testing.TB, bool) *rig) {
		r := newRig(t, false)
		log, hook := test.NewNullLogger()
		log.SetLevel(logrus.DebugLevel)
		r.server.target.report.log = logrus.NewEntry(log)
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		id, err := r.create(t, createReq("sb1", pidTarget("app1")))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range hook.AllEntries() {
			if e.Message != "create steps" {
				continue
			}
			for _, f := range []string{"prepare_record_us", "forward_us", "point_us", "answer_us", "total_us"} {
				if _, ok := e.Data[f].(int64); !ok {
					t.Errorf("create steps: no %s in %v", f, e.Data)
				}
			}
			if answer := e.Data["answer_us"].(int64); r.nri == nil && answer != 0 || e.Data["container"] != id {
				t.Errorf("create steps %v: an NRI answer's time on the Update path, or another container", e.Data)
			}
			return
		}
		t.Error("no create steps logged at debug level")
	})
}

// sink is an EventSink that keeps what it is given.
type sink struct {
	mu  sync.Mutex
	got []events.Event
}

func (s *sink) Post(e events.Event) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, e)
}

func (s *sink) posted() []events.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]events.Event(nil), s.got...)
}

// withPod is req as the kubelet sends it: its sandbox_config names the pod.
func withPod(req *runtimeapi.CreateContainerRequest) *runtimeapi.CreateContainerRequest {
	req.SandboxConfig = &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Uid: "0d6c", Namespace: "shop"}}
	return req
}

var shop = &oci.Pod{Namespace: "shop", Name: "web", UID: "0d6c"}

// What the Event on the pod says, from the targeting record alone: Normal
// when every namespace asked for was joined, a Warning naming the
// namespaces, the reason kind and the reason in words otherwise; containers
// by name, never by id.
func TestTargetingEvent(t *testing.T) {
	targeted := oci.NamespaceRecord{Result: oci.Targeted, Stage: "create", Path: "/run/cri-nstarget/pins/0123abcd/pid"}
	fell := func(stage string, why reasonKind) oci.NamespaceRecord {
		return oci.NamespaceRecord{Result: oci.Fallback, Stage: stage, ReasonKind: string(why), Reason: "detail naming 0123abcd"}
	}
	rec := func(pid, ipc *oci.NamespaceRecord) oci.Record {
		r := oci.Record{Target: "4567cdef", TargetName: "app", Pod: shop, Namespaces: map[string]oci.NamespaceRecord{}}
		if pid != nil {
			r.Namespaces["pid"] = *pid
		}
		if ipc != nil {
			r.Namespaces["ipc"] = *ipc
		}
		return r
	}
	ptr := func(r oci.NamespaceRecord) *oci.NamespaceRecord { return &r }
	noName := rec(ptr(fell("create", reasonTargetNotRunning)), nil)
	noName.TargetName = ""
	noPod := rec(ptr(targeted), nil)
	noPod.Pod = nil
	unknownOnly := rec(ptr(fell("create", reasonUnknownMode)), nil)
	unknownOnly.Target = ""
	for _, tc := range []struct {
		desc    string
		stage   string
		rec     oci.Record
		warning bool
		reason  string
		message string // "": no event
	}{
		{"pid joined", "create", rec(ptr(targeted), nil), false, "Targeted",
			"Container dbg joined the pid namespace of target container app (pinned by cri-nstarget): it sees app's processes."},
		{"pid and ipc joined", "create", rec(ptr(targeted), ptr(targeted)), false, "Targeted",
			"Container dbg joined the pid and ipc namespaces of target container app (pinned by cri-nstarget): it sees app's processes, and it shares app's IPC."},
		{"the target exited", "create", rec(ptr(fell("create", reasonTargetNotRunning)), nil), true, "TargetingFallback",
			"Container dbg runs in the pod's pid namespace, not in target container app's: app is not running (target_not_running). It sees the pod's processes, not app's."},
		{"pid joined, ipc refused by the kernel", "create", rec(ptr(targeted), ptr(fell("create", reasonUsernsRefused))), true, "TargetingFallback",
			"Container dbg joined the pid namespace of target container app (pinned by cri-nstarget), but runs in the pod's ipc namespace, not in target container app's: " +
				"dbg's user namespace may not join app's namespace (the kernel refuses it) (userns_refused). It shares the pod's IPC, not app's."},
		{"both fell back, one reason", "create", rec(ptr(fell("create", reasonContainerdUnavailable)), ptr(fell("create", reasonContainerdUnavailable))), true, "TargetingFallback",
			"Container dbg runs in the pod's pid and ipc namespaces, not in target container app's: containerd's API did not answer cri-nstarget (containerd_unavailable). " +
				"It sees the pod's processes, not app's, and it shares the pod's IPC, not app's."},
		{"both fell back, two reasons", "create", rec(ptr(fell("create", reasonPinFailed)), ptr(fell("create", reasonUsernsRefused))), true, "TargetingFallback",
			"Container dbg runs in the pod's pid and ipc namespaces, not in target container app's: pid: cri-nstarget could not pin app's namespace (pin_failed); " +
				"ipc: dbg's user namespace may not join app's namespace (the kernel refuses it) (userns_refused). It sees the pod's processes, not app's, and it shares the pod's IPC, not app's."},
		{"the target's name is not known", "create", noName, true, "TargetingFallback",
			"Container dbg runs in the pod's pid namespace, not in the target container's: the target is not running (target_not_running). It sees the pod's processes, not the target's."},
		{"at start: the target exited after create", "start", rec(ptr(fell("start", reasonNamespaceGone)), ptr(targeted)), true, "TargetingFallback",
			"Container dbg starts in the pod's pid namespace, not in target container app's: app exited after dbg was created, and its PID namespace has no process left (namespace_gone). " +
				"It sees the pod's processes, not app's."},
		{"at start: nothing fell back then", "start", rec(ptr(fell("create", reasonTargetNotRunning)), nil), false, "", ""},
		{"no pod in the request (crictl without metadata)", "create", noPod, false, "", ""},
		{"no target: only an unknown mode", "create", unknownOnly, false, "", ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			e, ok := targetingEvent("dbg", tc.stage, tc.rec)
			if ok != (tc.message != "") {
				t.Fatalf("event %v (%+v), want one: %v", ok, e, tc.message != "")
			}
			if !ok {
				return
			}
			want := events.Event{Pod: events.Pod{Namespace: "shop", Name: "web", UID: "0d6c"}, Container: "dbg", Warning: tc.warning, Reason: tc.reason, Message: tc.message}
			if e != want {
				t.Errorf("event\n%+v\nwant\n%+v", e, want)
			}
			if strings.Contains(e.Message, "0123abcd") || strings.Contains(e.Message, "4567cdef") || len(e.Message) > events.MaxMessage {
				t.Errorf("message names an id, or is over %d bytes: %q", events.MaxMessage, e.Message)
			}
		})
	}
}

// Each TARGET create posts one Event on its pod, after the outcome is
// decided, on both paths; a strict refusal posts none (the kubelet has its
// own Failed event with the refusal), and neither does a create whose
// client named no pod.
func TestCreatePostsEvent(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig func(testing.TB, bool) *rig) {
		for _, tc := range []struct {
			desc    string
			strict  bool
			state   runtimeapi.ContainerState
			pod     bool
			warning bool
			n       int
		}{
			{"running target", false, runtimeapi.ContainerState_CONTAINER_RUNNING, true, false, 1},
			{"exited target", false, runtimeapi.ContainerState_CONTAINER_EXITED, true, true, 1},
			{"exited target, strict", true, runtimeapi.ContainerState_CONTAINER_EXITED, true, false, 0},
			{"no pod metadata", false, runtimeapi.ContainerState_CONTAINER_RUNNING, false, false, 0},
		} {
			t.Run(tc.desc, func(t *testing.T) {
				r := newRig(t, tc.strict)
				s := &sink{}
				r.server.target.report.events = s
				r.addTarget("app1", "sb1", tc.state)
				req := createReq("sb1", pidTarget("app1"))
				if tc.pod {
					req = withPod(req)
				}
				_, err := r.create(t, req)
				if (err != nil) != tc.strict {
					t.Fatalf("create: %v", err)
				}
				got := s.posted()
				if len(got) != tc.n {
					t.Fatalf("posted %+v, want %d event(s)", got, tc.n)
				}
				if tc.n == 1 && (got[0].Warning != tc.warning || got[0].Container != "debugger" || got[0].Pod != (events.Pod{Namespace: "shop", Name: "web", UID: "0d6c"}) ||
					!strings.Contains(got[0].Message, "target container app")) {
					t.Errorf("posted %+v, want a Warning=%v about debugger on shop/web naming app", got[0], tc.warning)
				}
			})
		}
	})
}

// The record keeps the pod and the target's name, for the start stage and
// for crictl inspect.
func TestRecordNamesPodAndTarget(t *testing.T) {
	r := newRig(t, false)
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	id, err := r.create(t, withPod(createReq("sb1", pidTarget("app1"))))
	if err != nil {
		t.Fatal(err)
	}
	if rec := r.record(t, id); rec.TargetName != "app" || rec.Pod == nil || *rec.Pod != *shop {
		t.Errorf("record = %+v, want the pod shop/web and the target's name app", rec)
	}
}

// A pinned PID namespace that lost its init at StartContainer: the
// fallback posts a Warning on the pod, from the record alone.
func TestStartPostsEvent(t *testing.T) {
	r := newRig(t, false)
	s := &sink{}
	r.server.target.report.events = s
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	id, err := r.create(t, withPod(createReq("sb1", pidTarget("app1"))))
	if err != nil {
		t.Fatal(err)
	}
	r.live = false
	if err := r.start(id); err != nil {
		t.Fatal(err)
	}
	got := s.posted()
	if len(got) != 2 || got[0].Warning || !got[1].Warning || got[1].Reason != eventFallback ||
		!strings.Contains(got[1].Message, "starts in the pod's pid namespace") || !strings.Contains(got[1].Message, "namespace_gone") || got[1].Container != "debugger" {
		t.Errorf("posted %+v; want the create's Normal event, then a Warning at start", got)
	}
}
