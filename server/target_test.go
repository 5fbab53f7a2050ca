package server

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// fakeMetrics records what the server reports.
type fakeMetrics struct {
	mu        sync.Mutex
	calls     []string // "method code"
	targeting []string // "namespace/stage/result/reason"
}

func (f *fakeMetrics) Call(method string, code codes.Code, _ time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method+" "+code.String())
}

func (f *fakeMetrics) Targeting(namespace, stage, result, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targeting = append(f.targeting, strings.Join([]string{namespace, stage, result, reason}, "/"))
}

func (f *fakeMetrics) outcomes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(slices.Values(f.targeting))
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
				r.server.target.openNS = func(int, []namespaces.Kind) ([]*namespaces.Handle, error) {
					return nil, namespaces.ErrExited
				}
			},
			want:   []string{"pid/create/fallback/namespace_gone"},
			strict: []string{"pid/create/refused/namespace_gone"},
		},
		{
			desc: "namespaces cannot be opened", ns: pidTarget("app1"),
			setup: func(_ *testing.T, r *rig) {
				r.server.target.openNS = func(int, []namespaces.Kind) ([]*namespaces.Handle, error) {
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
			eachPath(t, func(t *testing.T, newRig func(testing.TB, bool) *rig) {
				for _, strict := range []bool{false, true} {
					r := newRig(t, strict)
					if path := map[bool]string{false: "update", true: "nri"}[r.nri != nil]; tc.only != "" && tc.only != path {
						return
					}
					m := &fakeMetrics{}
					r.setMetrics(m)
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
		r := newRig(t, tc.strict)
		m := &fakeMetrics{}
		r.setMetrics(m)
		r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
		id, err := r.create(t, createReq("sb1", pidTarget("app1")))
		if err != nil {
			t.Fatal(err)
		}
		r.server.target.hasInit = func(string) (bool, error) { return tc.live, tc.err }
		r.start(id)
		if got := m.outcomes(); !slices.Equal(got, tc.want) {
			t.Errorf("strict=%v live=%v err=%v: targeting = %q, want %q", tc.strict, tc.live, tc.err, got, tc.want)
		}
	}
}

type lookupFunc func(id string) (string, error)

func (f lookupFunc) CRIContainer(_ context.Context, id string) (criContainer, error) {
	sb, err := f(id)
	return criContainer{Sandbox: sb, Name: "app"}, err
}

// A target given by its full id is resolved through containerd's own
// metadata, not the CRI's ListContainers: another pod's is refused, one
// that is no CRI container (a sandbox, say) is NotFound, and when
// containerd's API fails the CRI resolves it after all.
func TestResolveFullID(t *testing.T) {
	full := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name      string
		lookup    lookupFunc
		code      codes.Code
		listCalls int
	}{
		{"same pod", func(string) (string, error) { return "sb1", nil }, codes.OK, 0},
		{"other pod", func(string) (string, error) { return "sb2", nil }, codes.FailedPrecondition, 0},
		{"not a CRI container", func(string) (string, error) { return "", errNotCRIContainer }, codes.NotFound, 0},
		{"containerd's API fails", func(string) (string, error) { return "", errors.New("unavailable") }, codes.OK, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, false)
			r.server.target.lookup = tc.lookup
			r.addTarget(full, "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
			_, err := r.create(t, createReq("sb1", pidTarget(full)))
			if status.Code(err) != tc.code {
				t.Fatalf("create = %v, want %v", err, tc.code)
			}
			if n := r.backendCalls("ListContainers"); n != tc.listCalls {
				t.Errorf("ListContainers called %d times, want %d", n, tc.listCalls)
			}
		})
	}
	if isFullID(strings.Repeat("AB", 32)) || isFullID("abc") || !isFullID(full) {
		t.Error("isFullID")
	}
}
