package oci

import (
	"encoding/json"
	"fmt"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// AnnotationTargeting is the OCI annotation in which cri-nstarget records,
// as JSON (a Record), what it did for a container that asked for
// NamespaceMode TARGET. `crictl inspect` shows it under info.runtimeSpec.
const AnnotationTargeting = "io.cri-nstarget.targeting"

// Results of targeting one namespace.
const (
	Targeted = "targeted" // the container joins the target's namespace
	Fallback = "fallback" // the container runs in the pod's namespace
)

// Record is what the shim did for one container.
type Record struct {
	Target string `json:"target"` // the target container's id
	// TargetName is the target container's name, and Pod the pod of both,
	// as the client named them (a kubelet: the Pod object): what the
	// shim's Events on the pod say at start. Empty in records written
	// before they were added.
	TargetName string                     `json:"targetName,omitempty"`
	Pod        *Pod                       `json:"pod,omitempty"`
	Namespaces map[string]NamespaceRecord `json:"namespaces"`
	// Via is how the spec was written: "nri" (in the runtime's own
	// CreateContainer, through its NRI) or "update" (through its API after
	// CreateContainer).
	Via string `json:"via,omitempty"`
	// Mode is "plugin" when cri-nstarget's plugin mode wrote the record
	// (containerd's own CRI served the create, and its NRI event was
	// answered); empty for the proxy.
	Mode string `json:"mode,omitempty"`
	// RuntimeHandler is the pod's runtime handler (its RuntimeClass's), by
	// containerd's name for it, when the shim knows it.
	RuntimeHandler string `json:"runtimeHandler,omitempty"`
	// TargetExited is set once the shim has said (an Event on the pod) that
	// the target's process, the init of the PID namespace this container
	// joined, exited and the kernel killed this container with it; nil
	// until then.
	TargetExited *TargetExit `json:"targetExited,omitempty"`
}

// TargetExit is the exit of the target that took a container with it.
type TargetExit struct {
	ExitCode int32  `json:"exitCode"`
	At       string `json:"at"` // RFC 3339, as containerd recorded it
}

// Pod is a pod sandbox's metadata as its client gave it.
type Pod struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
}

// NamespaceRecord is the outcome for one namespace type ("pid", "ipc").
type NamespaceRecord struct {
	Result string `json:"result"`
	Stage  string `json:"stage"`            // "create" or "start": when the outcome was decided
	Reason string `json:"reason,omitempty"` // why a fallback happened, in words
	// ReasonKind is the reason as one of a small fixed set (e.g.
	// "target_not_running"), the reason_kind of the shim's log and metric
	// (docs/operations.md lists them).
	ReasonKind string `json:"reasonKind,omitempty"`
	Path       string `json:"path,omitempty"`  // the pin the spec points at
	Inode      uint64 `json:"inode,omitempty"` // the target namespace's inode
	// PodPath is the namespace path the backend chose for the pod's shared
	// namespace: what a fallback after create restores. In the plugin mode
	// it is the path containerd chose (the target's /proc/<pid>/ns/pid),
	// which a fallback leaves.
	PodPath string `json:"podPath,omitempty"`

	// For a targeted ipc namespace: what the container shares with the
	// target. Shares lists "sysv" and "mqueue" (both belong to the IPC
	// namespace; /dev/mqueue is mounted in it), and "shm" when the
	// container's /dev/shm is the target's.
	Shares []string `json:"shares,omitempty"`
	// Shm is where the container's /dev/shm comes from: ShmPod (the target's
	// /dev/shm is the pod's, left as the backend made it) or the pin of the
	// target's. Empty when it is not shared: ShmReason says why.
	Shm       string `json:"shm,omitempty"`
	ShmReason string `json:"shmReason,omitempty"`
	// PodShm is the /dev/shm source the backend chose, restored on fallback.
	PodShm string `json:"podShm,omitempty"`

	// Verify is what the shim saw once the container had started (stage
	// "verify"): whether its init process is in the namespace its spec was
	// pointed at. Nil before, and for a namespace that fell back.
	Verify *Verification `json:"verify,omitempty"`
}

// Results of a verification.
const (
	// Joined: the container's init process is in the target's namespace.
	Joined = "joined"
	// NotJoined: it is in another namespace: the runtime did not join the
	// path its spec names.
	NotJoined = "not_joined"
	// Unverified: it could not be seen (its process is not visible on the
	// host, or exited first); Reason says why.
	Unverified = "unverified"
)

// Verification is what the shim saw of one namespace of a started
// container.
type Verification struct {
	Result     string `json:"result"` // Joined, NotJoined or Unverified
	Stage      string `json:"stage"`  // "verify"
	Reason     string `json:"reason,omitempty"`
	ReasonKind string `json:"reasonKind,omitempty"`
	// Inode is the namespace the container's init process was seen in
	// (what `readlink /proc/self/ns/KIND` prints inside it); 0 when unseen.
	Inode uint64 `json:"inode,omitempty"`
	// Stopped: strict targeting stopped the container, which did not join.
	Stopped bool `json:"stopped,omitempty"`
}

// ShmPod in NamespaceRecord.Shm: the target's /dev/shm is the pod's.
const ShmPod = "pod"

// WithRecord stores r in the AnnotationTargeting annotation.
func WithRecord(r Record) Opt {
	return func(s *specs.Spec) error {
		v, err := r.Encode()
		if err != nil {
			return err
		}
		return WithAnnotation(AnnotationTargeting, v)(s)
	}
}

// Encode is r as the AnnotationTargeting annotation's value.
func (r Record) Encode() (string, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return "", fmt.Errorf("encode targeting record: %w", err)
	}
	return string(b), nil
}

// ParseRecord reads the record from a spec's annotations; ok is false when
// there is none.
func ParseRecord(annotations map[string]string) (r Record, ok bool, err error) {
	v, ok := annotations[AnnotationTargeting]
	if !ok {
		return Record{}, false, nil
	}
	if err := json.Unmarshal([]byte(v), &r); err != nil {
		return Record{}, true, fmt.Errorf("decode %s annotation: %w", AnnotationTargeting, err)
	}
	return r, true, nil
}
