package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/containerd/containerd"
	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/containerd/errdefs"
	ctrns "github.com/containerd/containerd/namespaces"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// errTaskNotRunning means containerd has the container but no running task.
var errTaskNotRunning = errors.New("task not running")

// containerdAPI is the shim's view of containerd's own API (not its CRI):
// task pids and stored container specs, in one containerd namespace.
type containerdAPI struct {
	client *containerd.Client
	ns     string
}

// TaskPID returns the pid of the running task of container id.
func (c containerdAPI) TaskPID(ctx context.Context, id string) (uint32, error) {
	ctx = ctrns.WithNamespace(ctx, c.ns)
	resp, err := c.client.TaskService().Get(ctx, &tasks.GetRequest{ContainerID: id})
	if err != nil {
		return 0, fmt.Errorf("containerd task of %q: %w", id, errdefs.FromGRPC(err))
	}
	if st := resp.GetProcess().GetStatus(); st != task.Status_RUNNING {
		return 0, fmt.Errorf("containerd task of %q is %s: %w", id, st, errTaskNotRunning)
	}
	return resp.GetProcess().GetPid(), nil
}

// EditSpec rewrites the OCI spec containerd stores for container id, through
// oci.Patch so that only what the options touch changes.
func (c containerdAPI) EditSpec(ctx context.Context, id string, edit func(*specs.Spec) ([]oci.Opt, error)) error {
	ctx = ctrns.WithNamespace(ctx, c.ns)
	store := c.client.ContainerService()
	ctr, err := store.Get(ctx, id)
	if err != nil {
		return fmt.Errorf("containerd container %q: %w", id, errdefs.FromGRPC(err))
	}
	if ctr.Spec == nil {
		return fmt.Errorf("containerd container %q has no spec", id)
	}
	raw, err := oci.Patch(ctr.Spec.GetValue(), edit)
	if err != nil {
		return fmt.Errorf("containerd container %q: %w", id, err)
	}
	ctr.Spec = &anypb.Any{TypeUrl: ctr.Spec.GetTypeUrl(), Value: raw}
	if _, err := store.Update(ctx, ctr, "spec"); err != nil {
		return fmt.Errorf("update spec of containerd container %q: %w", id, errdefs.FromGRPC(err))
	}
	return nil
}
