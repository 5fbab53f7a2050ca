package server

import (
	"context"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// What the targeting needs from outside, small so unit tests can fake it.
type (
	// backendCRI is the typed part of the backend's CRI the shim calls
	// itself, all of it; each component is handed only the part it calls.
	backendCRI interface {
		targetCRI
		reconcilerCRI
		handlersCRI
		Version(ctx context.Context, in *runtimeapi.VersionRequest, opts ...grpc.CallOption) (*runtimeapi.VersionResponse, error)
		// for what happens after the answers (afterAnswer, after_answer.go)
		containerStatuses
		containerStopper
	}
	containerLister interface {
		ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
	}
	// targetCRI is what the targeting asks of containerd's CRI: a target's
	// container and its pod (target_prepare.go, container_start.go).
	targetCRI interface {
		containerLister
		ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error)
	}
	// reconcilerCRI: the containers of a create that did not finish, and
	// their removal (reconcile.go).
	reconcilerCRI interface {
		containerLister
		RemoveContainer(ctx context.Context, in *runtimeapi.RemoveContainerRequest, opts ...grpc.CallOption) (*runtimeapi.RemoveContainerResponse, error)
	}
	// handlersCRI: the pods' runtime handlers (runtime_handlers.go).
	handlersCRI interface {
		ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error)
		PodSandboxStatus(ctx context.Context, in *runtimeapi.PodSandboxStatusRequest, opts ...grpc.CallOption) (*runtimeapi.PodSandboxStatusResponse, error)
		Status(ctx context.Context, in *runtimeapi.StatusRequest, opts ...grpc.CallOption) (*runtimeapi.StatusResponse, error)
	}
	// versioner: the health check's question (health.go).
	versioner interface {
		Version(ctx context.Context, in *runtimeapi.VersionRequest, opts ...grpc.CallOption) (*runtimeapi.VersionResponse, error)
	}
	taskLookup interface {
		TaskPID(ctx context.Context, id string) (uint32, error)
	}
	// taskStates is containerd's word on a task (the check after a start,
	// target_verify.go).
	taskStates interface {
		TaskState(ctx context.Context, id string) (taskState, error)
	}
	// criContainers finds a CRI container by its full id in containerd's
	// own metadata: its pod sandbox and name, or errNotCRIContainer.
	criContainers interface {
		CRIContainer(ctx context.Context, id string) (criContainer, error)
	}
	specEditor interface {
		EditSpec(ctx context.Context, id string, edit func(*specs.Spec) ([]oci.Opt, error)) error
		Spec(ctx context.Context, id string) (*specs.Spec, error)
	}
	pinStore interface {
		Paths(id string, hs []*namespaces.Handle) (map[namespaces.Kind]string, error)
		Hold(id string, hs []*namespaces.Handle) error
		Add(id string, h *namespaces.Handle) (string, error)
		Path(id string, kind namespaces.Kind) (string, bool)
		Release(id string) error
		IDs() ([]string, error)
	}
)

// targeter is what the shim does besides forwarding: the hooks of the
// intercepted methods (container_*.go, sandbox_remove.go), which see a
// request as bytes and a function that forwards bytes; nothing here knows
// how calls arrive. A TARGET create goes plan (target_plan.go), prepare
// (target_prepare.go: the target resolved and opened), decide
// (target_decide.go, with the pins taken through target_pins.go) and
// render (target_render.go), inside containerd's create through NRI
// (createViaNRI, nri_answer.go) or after it (createViaUpdate, both in
// target_create.go). What has state or a lifetime of its own is
// elsewhere: the pins on disk (package pins), the intent records (package
// intents) and crash recovery (reconciler), the NRI connection (package
// nriplugin, behind nriAdapter), the log, metrics and Events
// (reporter), and what happens after the answers (afterAnswer, behind
// afterHooks). Every field is set by newTargeter, in one literal, from
// one deps value, before the first call, and never changes after.
type targeter struct {
	cri   targetCRI
	tasks taskLookup
	// records owns the containers' records: every read and write of one
	// goes through it (records.go)
	records *records
	pins    pinStore
	lookup  criContainers // nil: targets are resolved through the CRI only
	strict  bool
	log     *logrus.Entry
	report  reporter
	recon   *reconciler
	kernel  // the kernel's side (package namespaces), replaced in unit tests

	nri      nriAdapter  // nil: the Update path only
	removals removalGate // nil: RemovePodSandbox waits for nothing
	nriOnly  bool        // refuse TARGET creates while NRI is not usable

	// after is what happens after the answers (afterAnswer,
	// after_answer.go), told by the hooks of what they answered: a create,
	// a start, a removal. It owns its state; the targeter holds no more of
	// it than this handle.
	after afterHooks
	// handlers are the pods' runtime handlers (nil: every handler is
	// taken to join).
	handlers *handlers
}
