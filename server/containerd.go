package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	containers "github.com/containerd/containerd/api/services/containers/v1"
	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// errTaskNotRunning means containerd has the container but no running task.
var errTaskNotRunning = errors.New("task not running")

// taskStatusError is errTaskNotRunning with the status containerd gave
// the task (STOPPED, CREATED, PAUSED...).
type taskStatusError struct{ status task.Status }

func (e taskStatusError) Error() string        { return "its task is " + e.status.String() }
func (e taskStatusError) Is(target error) bool { return target == errTaskNotRunning }

// containerdAPI is the shim's view of containerd's own API (not its CRI):
// task pids and stored container specs, in one containerd namespace. It uses
// containerd's generated API clients, the same services the containerd Go
// client wraps, without the client's weight (about 17 MB of binary and
// 12 MB of resident memory: docs/reports/benchmarks.md). Errors keep containerd's
// gRPC status, so status.Code tells Unavailable or NotFound.
type containerdAPI struct {
	containers containers.ContainersClient
	tasks      tasks.TasksClient
	ns         string
}

func newContainerdAPI(conn grpc.ClientConnInterface, ns string) containerdAPI {
	return containerdAPI{containers: containers.NewContainersClient(conn), tasks: tasks.NewTasksClient(conn), ns: ns}
}

// withNamespace names the containerd namespace, as containerd's clients do,
// in the "containerd-namespace" header.
func (c containerdAPI) withNamespace(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "containerd-namespace", c.ns)
}

// TaskPID returns the pid of the running task of container id.
func (c containerdAPI) TaskPID(ctx context.Context, id string) (uint32, error) {
	resp, err := c.tasks.Get(c.withNamespace(ctx), &tasks.GetRequest{ContainerID: id})
	if err != nil {
		return 0, fmt.Errorf("containerd task of %q: %w", id, err)
	}
	if st := resp.GetProcess().GetStatus(); st != task.Status_RUNNING {
		return 0, fmt.Errorf("containerd task of %q: %w", id, taskStatusError{st})
	}
	return resp.GetProcess().GetPid(), nil
}

// taskState is containerd's word on a container's task at one moment: its
// init process's pid and status, and when it exited (STOPPED).
type taskState struct {
	pid      uint32
	status   task.Status
	exitedAt time.Time
}

// TaskState reads the state of container id's task: containerd asks the
// task's shim. A container without a task is NotFound.
func (c containerdAPI) TaskState(ctx context.Context, id string) (taskState, error) {
	resp, err := c.tasks.Get(c.withNamespace(ctx), &tasks.GetRequest{ContainerID: id})
	if err != nil {
		return taskState{}, fmt.Errorf("containerd task of %q: %w", id, err)
	}
	p := resp.GetProcess()
	st := taskState{pid: p.GetPid(), status: p.GetStatus()}
	if p.GetStatus() == task.Status_STOPPED && p.GetExitedAt() != nil {
		st.exitedAt = p.GetExitedAt().AsTime()
	}
	return st, nil
}

// Exists tells whether containerd's metadata has container id (of any
// kind): false for containerd's NotFound, its error for any other.
func (c containerdAPI) Exists(ctx context.Context, id string) (bool, error) {
	_, err := c.containers.Get(c.withNamespace(ctx), &containers.GetContainerRequest{ID: id})
	switch {
	case status.Code(err) == codes.NotFound:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("containerd container %q: %w", id, err)
	}
	return true, nil
}

// errNotCRIContainer: containerd has no CRI container (kind "container")
// with that id: none at all, a pod sandbox's, or one made outside the CRI.
var errNotCRIContainer = errors.New("no such CRI container")

// criContainer is what containerd's own API tells of a CRI container: its
// metadata, and its task.
type criContainer struct {
	Sandbox string // its pod sandbox's id
	Name    string // its name in the CRI (config.metadata.name); "" if not recorded
	// PID is its running task's pid; PIDErr, when not nil, why there is
	// none: errTaskNotRunning (a taskStatusError when it has a task), or
	// containerd's error.
	PID    uint32
	PIDErr error
}

// CRIContainer returns the pod sandbox and name of the CRI container with
// the full id id, read from containerd's own metadata (one read; the CRI's
// ListContainers costs more), and its task's pid, read at the same time.
// Sandbox and name are what the CRI plugin wrote in the container's spec
// (annotations io.kubernetes.cri.sandbox-id and
// io.kubernetes.cri.container-name, containerd 1.6 and 2.x alike).
func (c containerdAPI) CRIContainer(ctx context.Context, id string) (criContainer, error) {
	type pidAnswer struct {
		pid uint32
		err error
	}
	task := make(chan pidAnswer, 1)
	go func() {
		pid, err := c.TaskPID(ctx, id)
		task <- pidAnswer{pid, err}
	}()
	cc, err := c.criMetadata(ctx, id)
	a := <-task
	cc.PID, cc.PIDErr = a.pid, a.err
	return cc, err
}

// criMetadata is CRIContainer's read of the container's metadata.
func (c containerdAPI) criMetadata(ctx context.Context, id string) (criContainer, error) {
	resp, err := c.containers.Get(c.withNamespace(ctx), &containers.GetContainerRequest{ID: id})
	if status.Code(err) == codes.NotFound {
		return criContainer{}, fmt.Errorf("containerd container %q: %w", id, errNotCRIContainer)
	}
	if err != nil {
		return criContainer{}, fmt.Errorf("containerd container %q: %w", id, err)
	}
	ctr := resp.GetContainer()
	if ctr.GetLabels()[criKindLabel] != "container" {
		return criContainer{}, fmt.Errorf("containerd container %q is not a CRI container (kind %q): %w", id, ctr.GetLabels()[criKindLabel], errNotCRIContainer)
	}
	var spec struct {
		Annotations map[string]string `json:"annotations"`
	}
	if err := json.Unmarshal(ctr.GetSpec().GetValue(), &spec); err != nil {
		return criContainer{}, fmt.Errorf("containerd container %q: decode spec: %w", id, err)
	}
	sandbox := spec.Annotations[criSandboxAnnotation]
	if sandbox == "" {
		return criContainer{}, fmt.Errorf("containerd container %q has no %s annotation", id, criSandboxAnnotation)
	}
	return criContainer{Sandbox: sandbox, Name: spec.Annotations[criNameAnnotation]}, nil
}

// What containerd's CRI plugin marks its objects with.
const (
	criKindLabel         = "io.cri-containerd.kind"
	criSandboxAnnotation = "io.kubernetes.cri.sandbox-id"
	criNameAnnotation    = "io.kubernetes.cri.container-name"
)

// Spec reads the OCI spec containerd stores for container id.
func (c containerdAPI) Spec(ctx context.Context, id string) (*specs.Spec, error) {
	resp, err := c.containers.Get(c.withNamespace(ctx), &containers.GetContainerRequest{ID: id})
	if err != nil {
		return nil, fmt.Errorf("containerd container %q: %w", id, err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(resp.GetContainer().GetSpec().GetValue(), &spec); err != nil {
		return nil, fmt.Errorf("containerd container %q: decode spec: %w", id, err)
	}
	return &spec, nil
}

// EditSpec rewrites the OCI spec containerd stores for container id, through
// oci.Patch so that only what the options touch changes.
func (c containerdAPI) EditSpec(ctx context.Context, id string, edit func(*specs.Spec) ([]oci.Opt, error)) error {
	ctx = c.withNamespace(ctx)
	resp, err := c.containers.Get(ctx, &containers.GetContainerRequest{ID: id})
	if err != nil {
		return fmt.Errorf("containerd container %q: %w", id, err)
	}
	ctr := resp.GetContainer()
	if ctr.GetSpec() == nil {
		return fmt.Errorf("containerd container %q has no spec", id)
	}
	raw, err := oci.Patch(ctr.GetSpec().GetValue(), edit)
	if err != nil {
		return fmt.Errorf("containerd container %q: %w", id, err)
	}
	// Only the spec is sent: the labels read may have been made valid
	// UTF-8 (lenientConn), and the mask keeps containerd's own.
	_, err = c.containers.Update(ctx, &containers.UpdateContainerRequest{
		Container:  &containers.Container{ID: id, Spec: &anypb.Any{TypeUrl: ctr.GetSpec().GetTypeUrl(), Value: raw}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"spec"}}})
	if err != nil {
		return fmt.Errorf("update spec of containerd container %q: %w", id, err)
	}
	return nil
}
