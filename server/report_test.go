package server

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	nriapi "github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/events"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/nriplugin"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// TestCreateStepsLogged: at debug level a targeted create says where its
// time went, step by step, on both paths.
func TestCreateStepsLogged(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		log, hook := test.NewNullLogger()
		log.SetLevel(logrus.DebugLevel)
		r := newRig(t, false, func(d *deps) { d.log = logrus.NewEntry(log) })
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

// What the Event on the pod says at create and start, from the targeting
// record alone: nothing when every namespace asked for is pointed at the
// target's (what joins is said once seen, after the start: verifiedEvent),
// a Warning naming the namespaces, the reason kind and the reason in words
// otherwise; containers by name, never by id.
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
		{"pid pointed at the target's", "create", rec(ptr(targeted), nil), false, "", ""},
		{"pid and ipc pointed at the target's", "create", rec(ptr(targeted), ptr(targeted)), false, "", ""},
		{"the target exited", "create", rec(ptr(fell("create", reasonTargetNotRunning)), nil), true, "TargetingFallback",
			"Container dbg runs in the pod's pid namespace, not in target container app's: app is not running (target_not_running). It sees the pod's processes, not app's."},
		{"pid joined, ipc refused by the kernel", "create", rec(ptr(targeted), ptr(fell("create", reasonUsernsRefused))), true, "TargetingFallback",
			"Container dbg is pointed at the pid namespace of target container app (pinned by cri-nstarget; checked once it starts), but runs in the pod's ipc namespace, not in target container app's: " +
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
			want := Event{Pod: oci.Pod{Namespace: "shop", Name: "web", UID: "0d6c"}, Container: "dbg", Warning: tc.warning, Reason: tc.reason, Message: tc.message}
			if e != want {
				t.Errorf("event\n%+v\nwant\n%+v", e, want)
			}
			if strings.Contains(e.Message, "0123abcd") || strings.Contains(e.Message, "4567cdef") || len(e.Message) > events.MaxMessage {
				t.Errorf("message names an id, or is over %d bytes: %q", events.MaxMessage, e.Message)
			}
		})
	}
}

// A TARGET create that falls back posts one Warning on its pod, after the
// outcome is decided, on both paths; one pointed at the target's namespaces
// posts none at create (what it joined is said after its start, once
// seen); a strict refusal posts none (the kubelet has its own Failed event
// with the refusal), and neither does a create whose client named no pod.
func TestCreatePostsEvent(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		for _, tc := range []struct {
			desc    string
			strict  bool
			state   runtimeapi.ContainerState
			pod     bool
			warning bool
			n       int
		}{
			{"running target", false, runtimeapi.ContainerState_CONTAINER_RUNNING, true, false, 0},
			{"exited target", false, runtimeapi.ContainerState_CONTAINER_EXITED, true, true, 1},
			{"exited target, strict", true, runtimeapi.ContainerState_CONTAINER_EXITED, true, false, 0},
			{"no pod metadata", false, runtimeapi.ContainerState_CONTAINER_RUNNING, false, false, 0},
		} {
			t.Run(tc.desc, func(t *testing.T) {
				r := newRig(t, tc.strict)
				s := &sink{}
				r.events = s
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
				if tc.n == 1 && (got[0].Warning != tc.warning || got[0].Container != "debugger" || got[0].Pod != (oci.Pod{Namespace: "shop", Name: "web", UID: "0d6c"}) ||
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
	r.events = s
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
	if len(got) != 1 || !got[0].Warning || got[0].Reason != eventFallback ||
		!strings.Contains(got[0].Message, "starts in the pod's pid namespace") || !strings.Contains(got[0].Message, "namespace_gone") || got[0].Container != "debugger" {
		t.Errorf("posted %+v; want one Warning at start", got)
	}
}

// TestTargetingMetrics: every outcome and fallback reason reaches the
// targeting metric, on both paths (a spec that cannot be written is the
// Update path's alone; a conflict with another NRI plugin, NRI's).
func TestTargetingMetrics(t *testing.T) {
	both := &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, Ipc: runtimeapi.NamespaceMode_TARGET, TargetId: "app1"}
	for _, tc := range []struct {
		desc   string
		ns     *runtimeapi.NamespaceOption
		setup  func(*testing.T, *rig)
		want   []string // default mode
		strict []string // strict mode
		only   string   // the one path it applies to; "": both
	}{
		{
			desc: "targeted", ns: both,
			want:   []string{"ipc/create/targeted/none", "pid/create/targeted/none"},
			strict: []string{"ipc/create/targeted/none", "pid/create/targeted/none"},
		},
		{
			desc: "target not running", ns: pidTarget("app1"),
			setup:  func(_ *testing.T, r *rig) { r.backend.containers[0].State = runtimeapi.ContainerState_CONTAINER_EXITED },
			want:   []string{"pid/create/fallback/target_not_running"},
			strict: []string{"pid/create/refused/target_not_running"},
		},
		{
			desc: "no task", ns: pidTarget("app1"),
			setup:  func(_ *testing.T, r *rig) { r.tasks.err = errTaskNotRunning },
			want:   []string{"pid/create/fallback/target_not_running"},
			strict: []string{"pid/create/refused/target_not_running"},
		},
		{
			desc: "containerd unavailable", ns: both,
			setup:  func(_ *testing.T, r *rig) { r.tasks.err = errContainerdDown },
			want:   []string{"ipc/create/fallback/containerd_unavailable", "pid/create/fallback/containerd_unavailable"},
			strict: []string{"ipc/create/refused/containerd_unavailable", "pid/create/refused/containerd_unavailable"},
		},
		{
			desc: "target exited while its namespaces were opened", ns: pidTarget("app1"),
			setup: func(_ *testing.T, r *rig) {
				r.kernel.openNS = func(int, []namespaces.Kind) ([]*namespaces.Handle, error) {
					return nil, namespaces.ErrExited
				}
			},
			want:   []string{"pid/create/fallback/namespace_gone"},
			strict: []string{"pid/create/refused/namespace_gone"},
		},
		{
			desc: "namespaces cannot be opened", ns: pidTarget("app1"),
			setup: func(_ *testing.T, r *rig) {
				r.kernel.openNS = func(int, []namespaces.Kind) ([]*namespaces.Handle, error) {
					return nil, errors.New("open /proc/4242/ns/pid: permission denied")
				}
			},
			want:   []string{"pid/create/fallback/namespace_open_failed"},
			strict: []string{"pid/create/refused/namespace_open_failed"},
		},
		{
			desc: "unknown mode", ns: &runtimeapi.NamespaceOption{Network: 7},
			want:   []string{"network/create/fallback/unknown_mode"},
			strict: []string{"network/create/refused/unknown_mode"},
		},
		{
			desc: "pin failed", ns: pidTarget("app1"),
			setup:  func(_ *testing.T, r *rig) { r.pins.err = errors.New("mount: operation not permitted") },
			want:   []string{"pid/create/fallback/pin_failed"},
			strict: []string{"pid/create/refused/pin_failed"},
		},
		{
			desc: "spec update failed", ns: pidTarget("app1"), only: "update",
			setup:  func(_ *testing.T, r *rig) { r.specs.err = errors.New("update spec: conflict") },
			want:   []string{"pid/create/fallback/spec_update_failed"},
			strict: []string{"pid/create/refused/spec_update_failed"},
		},
		{
			desc: "spec update failed, containerd gone", ns: pidTarget("app1"), only: "update",
			setup:  func(_ *testing.T, r *rig) { r.specs.err = errContainerdDown },
			want:   []string{"pid/create/fallback/containerd_unavailable"},
			strict: []string{"pid/create/refused/containerd_unavailable"},
		},
		{
			desc: "another NRI plugin sets the namespace", ns: pidTarget("app1"), only: "nri",
			setup:  func(t *testing.T, r *rig) { otherPlugin(t, r, "pid") },
			want:   []string{"pid/create/fallback/nri_conflict"},
			strict: []string{"pid/create/refused/nri_conflict"},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			eachPath(t, func(t *testing.T, newRig rigMaker) {
				for _, strict := range []bool{false, true} {
					m := &fakeMetrics{}
					r := newRig(t, strict, withMetrics(m))
					if path := map[bool]string{false: "update", true: "nri"}[r.nri != nil]; tc.only != "" && tc.only != path {
						return
					}
					r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
					if tc.setup != nil {
						tc.setup(t, r)
					}
					r.create(t, createReq("sb1", tc.ns))
					want := tc.want
					if strict {
						want = tc.strict
					}
					if got := m.outcomes(); !slices.Equal(got, want) {
						t.Errorf("strict=%v: targeting = %q, want %q", strict, got, want)
					}
				}
			})
		})
	}
}

func TestTargetingMetricsAtStart(t *testing.T) {
	for _, tc := range []struct {
		strict bool
		live   bool
		err    error
		want   []string
	}{
		{live: true, want: []string{"pid/create/targeted/none"}},
		{live: false, want: []string{"pid/create/targeted/none", "pid/start/fallback/namespace_gone"}},
		{strict: true, live: false, want: []string{"pid/create/targeted/none", "pid/start/refused/namespace_gone"}},
		{err: errors.New("stat: no such file"), want: []string{"pid/create/targeted/none", "pid/start/fallback/pin_failed"}},
	} {
		m := &fakeMetrics{}
		r := newRig(t, tc.strict, withMetrics(m))
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		id, err := r.create(t, createReq("sb1", pidTarget("app1")))
		if err != nil {
			t.Fatal(err)
		}
		r.kernel.hasInit = func(string) (bool, error) { return tc.live, tc.err }
		r.start(id)
		if got := m.outcomes(); !slices.Equal(got, tc.want) {
			t.Errorf("strict=%v live=%v err=%v: targeting = %q, want %q", tc.strict, tc.live, tc.err, got, tc.want)
		}
	}
}

// A targeted create's outcome line is written once its answer has gone
// back, on the side queue (a check holding it up holds the line, never the
// create), stamped when the create was decided, in every mode: the
// proxy's two paths and the plugin's answer to containerd's event.
func TestOutcomeLoggedAfterTheAnswer(t *testing.T) {
	type creator func(t *testing.T, r *rig)
	check := func(t *testing.T, r *rig, hook *test.Hook, create creator) {
		hold, running := make(chan struct{}), make(chan struct{})
		defer close(hold)
		r.server.after.side.submit(chanVerify, func(context.Context) {
			close(running)
			<-hold
		})
		<-running
		create(t, r)
		answered := time.Now()
		if e := joinsLine(hook); e != nil {
			t.Fatalf("the outcome line was written before the create's answer went back, while the side queue was held: %v", e.Data)
		}
		hold <- struct{}{}
		waitFor(t, "the outcome line", func() bool { return joinsLine(hook) != nil })
		if e := joinsLine(hook); e.Time.After(answered) || e.Data["namespace"] != "pid" || e.Data["target"] == "" {
			t.Errorf("outcome line %v at %v, want the pid namespace's, with its target, stamped before the answer (%v)", e.Data, e.Time, answered)
		}
	}
	logged := func() (*logrus.Entry, *test.Hook) {
		log, hook := test.NewNullLogger()
		return logrus.NewEntry(log), hook
	}
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		log, hook := logged()
		r := newRig(t, false, func(d *deps) { d.log = log })
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		check(t, r, hook, func(t *testing.T, r *rig) {
			if _, err := r.create(t, createReq("sb1", pidTarget("app1"))); err != nil {
				t.Fatal(err)
			}
		})
	})
	t.Run("plugin", func(t *testing.T) {
		log, hook := logged()
		pl := logrus.New()
		pl.SetLevel(logrus.PanicLevel)
		r := buildRigEdit(t, false, nriplugin.New("/nonexistent/nri.sock", logrus.NewEntry(pl), nil), true, func(d *deps) { d.log = log })
		r.addTarget("app", "sb", runtimeapi.ContainerState_CONTAINER_RUNNING)
		m := r.server.plugin
		m.Synchronized([]*nriapi.PodSandbox{nriPod}, []*nriapi.Container{running("app", "sb", 4242)})
		check(t, r, hook, func(t *testing.T, r *rig) {
			if adj, err := m.Create(nriPod, debugCtr("/proc/4242/ns/pid")); err != nil || pidPath(adj) == "(none)" {
				t.Fatalf("plugin's answer %v, %v; want the pin", adj, err)
			}
		})
	})
}

// joinsLine is the first "container joins the target's namespace" entry.
func joinsLine(hook *test.Hook) *logrus.Entry {
	for _, e := range hook.AllEntries() {
		if e.Message == "container joins the target's namespace" {
			return e
		}
	}
	return nil
}
