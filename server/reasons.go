package server

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// reasonKind says, from a small fixed set, why targeting a namespace fell
// back (or, strict, was refused). It labels the targeting metric and the
// warning log line; the free-text reason beside it, in the log line and the
// annotation, says the rest. Never an id, never error text: the set is what
// dashboards and alerts are written against (docs/operations.md lists it).
type reasonKind string

const (
	// reasonNone labels targeted outcomes.
	reasonNone reasonKind = "none"
	// The target is not RUNNING in the CRI, or containerd has no running
	// task for it.
	reasonTargetNotRunning reasonKind = "target_not_running"
	// The target's process exited while its namespaces were being opened,
	// or (at start) its PID namespace lost its init.
	reasonNamespaceGone reasonKind = "namespace_gone"
	// The target's namespaces could not be opened for another reason
	// (permissions: CAP_SYS_PTRACE, CAP_KILL; its pid changed under us).
	reasonNamespaceOpenFailed reasonKind = "namespace_open_failed"
	// containerd's API did not answer, or failed the call.
	reasonContainerdUnavailable reasonKind = "containerd_unavailable"
	// The request carried a NamespaceMode this build does not know.
	reasonUnknownMode reasonKind = "unknown_mode"
	// The pin could not be made under the state dir, or (at start) read.
	reasonPinFailed reasonKind = "pin_failed"
	// The new container's spec could not be pointed at the pins.
	reasonSpecUpdateFailed reasonKind = "spec_update_failed"
	// The container's user namespace (a user-namespaced pod's) holds no
	// rights in the user namespace that owns the target's namespace, so
	// the kernel would refuse the join.
	reasonUsernsRefused reasonKind = "userns_refused"
	// Another NRI plugin sets the same namespace of the container: NRI lets
	// only one plugin adjust a field, and the other keeps it.
	reasonNRIConflict reasonKind = "nri_conflict"
	// The pod's runtime handler does not join the namespace paths a spec
	// names (a VM or user-space-kernel runtime): the configuration says
	// so, containerd's runtime type, or what verification saw of it.
	reasonRuntimeCannotJoin reasonKind = "runtime_cannot_join"
	// The plugin mode: the PID namespace path containerd wrote names a pid
	// that is no running container of the pod (or no longer the target's).
	reasonPIDNotInPod reasonKind = "pid_not_in_pod"

	// What verification (stage verify) saw, besides reasonNone for joined
	// and the reasons above that apply (containerd_unavailable,
	// namespace_open_failed, pin_failed):
	//
	// The container's init process is in another namespace than the one
	// its spec names: the runtime did not join the path.
	reasonNotJoined reasonKind = "runtime_not_joined"
	// The container's task has no process the host can see as its init
	// (pid 0, or a process of the host's PID namespace: a VM runtime's).
	reasonNotVisible reasonKind = "process_not_visible"
	// The container exited before its namespaces could be read, or its
	// task was gone before containerd could confirm what was read.
	reasonExitedUnread reasonKind = "exited_unobserved"
	// containerd's word on the task does not match the process read (its
	// pid, or an exit recorded before the read): it may have been another
	// process, so nothing is concluded.
	reasonPIDChanged reasonKind = "pid_changed"
)

// Results of targeting, as the metric labels them: oci.Targeted and
// oci.Fallback, and refused (strict mode turned a fallback into an error).
const resultRefused = "refused"

// whyNoPID classifies a failure to get the target's task pid.
func whyNoPID(err error) reasonKind {
	if errors.Is(err, errTaskNotRunning) || status.Code(err) == codes.NotFound {
		return reasonTargetNotRunning
	}
	return reasonContainerdUnavailable
}

// whyNoNamespace classifies a failure to open the target's namespaces
// (including the verification of its pid through containerd).
func whyNoNamespace(err error) reasonKind {
	switch {
	case codeOf(err) == codes.Unavailable:
		return reasonContainerdUnavailable
	case errors.Is(err, errTaskNotRunning) || status.Code(err) == codes.NotFound:
		return reasonTargetNotRunning
	case errors.Is(err, namespaces.ErrExited):
		return reasonNamespaceGone
	}
	return reasonNamespaceOpenFailed
}

// whySpecNotUpdated classifies a failure to edit the new container's spec.
func whySpecNotUpdated(err error) reasonKind {
	if codeOf(err) == codes.Unavailable {
		return reasonContainerdUnavailable
	}
	return reasonSpecUpdateFailed
}
