package server

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	containers "github.com/containerd/containerd/api/services/containers/v1"
	"github.com/containerd/containerd/api/types/task"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

func TestTaskPID(t *testing.T) {
	f, api := newFakeContainerd(t)
	f.procs["run"] = &task.Process{Pid: 42, Status: task.Status_RUNNING}
	f.procs["stopped"] = &task.Process{Pid: 43, Status: task.Status_STOPPED}
	ctx := context.Background()
	if pid, err := api.TaskPID(ctx, "run"); pid != 42 || err != nil {
		t.Errorf("running task: %d, %v", pid, err)
	}
	if _, err := api.TaskPID(ctx, "stopped"); !errors.Is(err, errTaskNotRunning) {
		t.Errorf("stopped task: %v, want errTaskNotRunning", err)
	}
	if _, err := api.TaskPID(ctx, "none"); status.Code(errors.Unwrap(err)) != codes.NotFound {
		t.Errorf("no task: %v, want containerd's NotFound kept", err)
	}
	for _, ns := range f.ns {
		if ns != "k8s.io" {
			t.Errorf("called in containerd namespace %q", ns)
		}
	}
}

// Exists is containerd's metadata asked whether a container is there (the
// plugin mode tells so an undone create from a stop): its NotFound is no
// container; any other error is no answer, not taken for either.
func TestExists(t *testing.T) {
	f, api := newFakeContainerd(t)
	f.ctrs["app"] = &containers.Container{ID: "app"}
	ctx := context.Background()
	if ok, err := api.Exists(ctx, "app"); !ok || err != nil {
		t.Errorf("a container containerd has: %v, %v", ok, err)
	}
	if ok, err := api.Exists(ctx, "gone"); ok || err != nil {
		t.Errorf("a container containerd does not have: %v, %v; want false, no error", ok, err)
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := api.Exists(cancelled, "app"); err == nil {
		t.Error("no answer from containerd: no error")
	}
	if _, err := (&pluginMode{}).Exists(ctx, "app"); err == nil {
		t.Error("the plugin mode without containerd's API: no error")
	}
	for _, ns := range f.ns {
		if ns != "k8s.io" {
			t.Errorf("called in containerd namespace %q", ns)
		}
	}
}

// The target's pod sandbox comes from containerd's metadata, whatever other
// labels the container carries: one that is not UTF-8 does not stop it; its
// task's pid, or why there is none, comes with it.
func TestCRIContainer(t *testing.T) {
	f, api := newFakeContainerd(t)
	spec := &specs.Spec{Annotations: map[string]string{criSandboxAnnotation: "sb1", criNameAnnotation: "app"}}
	f.ctrs["app"] = &containers.Container{ID: "app", Labels: map[string]string{criKindLabel: "container", "odd": "~X4~"}, Spec: specAny(t, spec)}
	f.ctrs["pod"] = &containers.Container{ID: "pod", Labels: map[string]string{criKindLabel: "sandbox"}, Spec: specAny(t, spec)}
	f.ctrs["bare"] = &containers.Container{ID: "bare", Labels: map[string]string{criKindLabel: "container"}, Spec: specAny(t, &specs.Spec{})}
	f.procs["app"] = &task.Process{Pid: 42, Status: task.Status_RUNNING}
	ctx := context.Background()
	if c, err := api.CRIContainer(ctx, "app"); c != (criContainer{Sandbox: "sb1", Name: "app", PID: 42}) || err != nil {
		t.Errorf("CRI container with a label that is not UTF-8: %+v, %v", c, err)
	}
	// its task is read with it: none is the reason there is no pid
	f.procs["app"] = &task.Process{Pid: 42, Status: task.Status_STOPPED}
	if c, err := api.CRIContainer(ctx, "app"); c.Sandbox != "sb1" || !errors.Is(c.PIDErr, errTaskNotRunning) || err != nil {
		t.Errorf("CRI container whose task stopped: %+v, %v", c, err)
	}
	for _, id := range []string{"pod", "none"} {
		if _, err := api.CRIContainer(ctx, id); !errors.Is(err, errNotCRIContainer) {
			t.Errorf("%s: %v, want errNotCRIContainer", id, err)
		}
	}
	if _, err := api.CRIContainer(ctx, "bare"); err == nil || errors.Is(err, errNotCRIContainer) {
		t.Errorf("a CRI container without its sandbox annotation: %v", err)
	}
}

// EditSpec sends containerd the patched spec alone, under the mask "spec":
// labels it read (made valid UTF-8 on the way in) are never written back.
func TestEditSpecSendsTheSpecAlone(t *testing.T) {
	f, api := newFakeContainerd(t)
	spec := &specs.Spec{Version: "1.2.0", Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace, Path: "/proc/7/ns/pid"}}}}
	f.ctrs["dbg"] = &containers.Container{ID: "dbg", Labels: map[string]string{"odd": "~X4~"}, Spec: specAny(t, spec)}
	err := api.EditSpec(context.Background(), "dbg", func(*specs.Spec) ([]oci.Opt, error) {
		return []oci.Opt{oci.WithNamespacePath(specs.PIDNamespace, "/pins/dbg/pid")}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(f.updates) != 1 {
		t.Fatalf("%d updates", len(f.updates))
	}
	u := f.updates[0]
	if got := u.GetUpdateMask().GetPaths(); len(got) != 1 || got[0] != "spec" {
		t.Errorf("mask %v, want [spec]", got)
	}
	if c := u.GetContainer(); c.GetID() != "dbg" || len(c.GetLabels()) != 0 || c.GetImage() != "" || c.GetSpec().GetTypeUrl() != specAny(t, spec).GetTypeUrl() {
		t.Errorf("sent %v, want the id and the spec alone", c)
	}
	var got specs.Spec
	if err := json.Unmarshal(u.GetContainer().GetSpec().GetValue(), &got); err != nil {
		t.Fatal(err)
	}
	if p, _ := oci.NamespacePath(&got, specs.PIDNamespace); p != "/pins/dbg/pid" || got.Version != "1.2.0" {
		t.Errorf("spec sent: pid path %q, version %q", p, got.Version)
	}
	if err := api.EditSpec(context.Background(), "none", func(*specs.Spec) ([]oci.Opt, error) { return nil, nil }); status.Code(errors.Unwrap(err)) != codes.NotFound {
		t.Errorf("no such container: %v", err)
	}
}
