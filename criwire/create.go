package criwire

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Field numbers of runtime/v1/api.proto (fields_test.go checks them).
const (
	createSandboxID     = 1 // CreateContainerRequest.pod_sandbox_id
	createConfig        = 2 // CreateContainerRequest.config
	createSandboxConfig = 3 // CreateContainerRequest.sandbox_config

	sandboxMetadata = 1 // PodSandboxConfig.metadata

	podName      = 1 // PodSandboxMetadata.name
	podUID       = 2 // PodSandboxMetadata.uid
	podNamespace = 3 // PodSandboxMetadata.namespace

	configMetadata    = 1  // ContainerConfig.metadata
	configAnnotations = 10 // ContainerConfig.annotations
	configLinux       = 15 // ContainerConfig.linux

	metadataName    = 1 // ContainerMetadata.name
	metadataAttempt = 2 // ContainerMetadata.attempt

	linuxSecurityContext = 2 // LinuxContainerConfig.security_context
	securityNamespaces   = 3 // LinuxContainerSecurityContext.namespace_options

	nsNetwork  = 1 // NamespaceOption.network
	nsPID      = 2 // NamespaceOption.pid
	nsIPC      = 3 // NamespaceOption.ipc
	nsTargetID = 4 // NamespaceOption.target_id

	entryKey   = 1 // a map entry's key
	entryValue = 2 // a map entry's value

	containerID = 1 // {Start,Remove}ContainerRequest and CreateContainerResponse .container_id
)

// Create is what the shim reads of a CreateContainerRequest.
type Create struct {
	SandboxID string // pod_sandbox_id
	Name      string // config.metadata.name
	Attempt   uint32 // config.metadata.attempt
	// Namespaces is config.linux.security_context.namespace_options, nil
	// where the request has none.
	Namespaces *Namespaces
	// Pod is sandbox_config.metadata: the pod as its client named it (a
	// kubelet: the Pod object's namespace, name and uid).
	Pod Pod
}

// Pod is a PodSandboxMetadata's name, uid and namespace.
type Pod struct {
	Name, UID, Namespace string
}

// Namespaces is a NamespaceOption's modes and target. Strings are the bytes
// sent, UTF-8 or not.
type Namespaces struct {
	Network, PID, IPC runtimeapi.NamespaceMode
	TargetID          string
}

// ReadCreate reads a CreateContainerRequest's fields that targeting needs,
// as the backend's decoder would see them.
func ReadCreate(b []byte) (Create, error) {
	var c Create
	err := walk(b, func(f field) error {
		switch {
		case f.bytes(createSandboxID):
			c.SandboxID = string(f.val)
		case f.bytes(createConfig):
			return walk(f.val, c.config)
		case f.bytes(createSandboxConfig):
			return walk(f.val, c.sandboxConfig)
		}
		return nil
	})
	return c, err
}

func (c *Create) sandboxConfig(f field) error {
	if !f.bytes(sandboxMetadata) {
		return nil
	}
	return walk(f.val, func(f field) error {
		switch {
		case f.bytes(podName):
			c.Pod.Name = string(f.val)
		case f.bytes(podUID):
			c.Pod.UID = string(f.val)
		case f.bytes(podNamespace):
			c.Pod.Namespace = string(f.val)
		}
		return nil
	})
}

func (c *Create) config(f field) error {
	switch {
	case f.bytes(configMetadata):
		return walk(f.val, func(f field) error {
			switch {
			case f.bytes(metadataName):
				c.Name = string(f.val)
			case f.varint(metadataAttempt):
				c.Attempt = uint32(f.u)
			}
			return nil
		})
	case f.bytes(configLinux):
		return walk(f.val, func(f field) error {
			if !f.bytes(linuxSecurityContext) {
				return nil
			}
			return walk(f.val, func(f field) error {
				if !f.bytes(securityNamespaces) {
					return nil
				}
				if c.Namespaces == nil {
					c.Namespaces = &Namespaces{}
				}
				return walk(f.val, c.Namespaces.field)
			})
		})
	}
	return nil
}

func (n *Namespaces) field(f field) error {
	switch {
	case f.varint(nsNetwork):
		n.Network = runtimeapi.NamespaceMode(int32(f.u))
	case f.varint(nsPID):
		n.PID = runtimeapi.NamespaceMode(int32(f.u))
	case f.varint(nsIPC):
		n.IPC = runtimeapi.NamespaceMode(int32(f.u))
	case f.bytes(nsTargetID):
		n.TargetID = string(f.val)
	}
	return nil
}

// Known reports whether m is a NamespaceMode a backend acts on without the
// shim: POD, CONTAINER or NODE.
func Known(m runtimeapi.NamespaceMode) bool {
	switch m {
	case runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_NODE:
		return true
	}
	return false
}

// Annotation is a key and value added to config.annotations.
type Annotation struct{ Key, Value string }

// errNoConfig: annotations were to be added to a request without a config.
var errNoConfig = errors.New("the request has no config to annotate")

// RewriteCreate returns the CreateContainerRequest b as the backend is to
// get it: in every namespace_options it holds, each mode other than POD,
// CONTAINER and NODE (TARGET, or unknown) is POD and target_id is gone;
// add, if any, follow every entry of config.annotations (of the last config,
// where a request holds several, as protobuf merges them), so they win over
// an entry of the same key. Every other field is as it came, in its place,
// with its bytes; only the lengths of the messages that enclose a change
// differ.
func RewriteCreate(b []byte, add ...Annotation) ([]byte, error) {
	annotated := len(add) == 0
	out, err := edit(b, createConfig, func(cfg []byte, last bool) ([]byte, error) {
		cfg, err := edit(cfg, configLinux, func(p []byte, _ bool) ([]byte, error) {
			return edit(p, linuxSecurityContext, func(p []byte, _ bool) ([]byte, error) {
				return edit(p, securityNamespaces, func(p []byte, _ bool) ([]byte, error) { return podModes(p) })
			})
		})
		if err != nil || !last {
			return cfg, err
		}
		for _, a := range add {
			var e []byte
			e = protowire.AppendTag(e, entryKey, protowire.BytesType)
			e = protowire.AppendString(e, a.Key)
			e = protowire.AppendTag(e, entryValue, protowire.BytesType)
			e = protowire.AppendString(e, a.Value)
			cfg = protowire.AppendTag(cfg, configAnnotations, protowire.BytesType)
			cfg = protowire.AppendBytes(cfg, e)
		}
		annotated = true
		return cfg, nil
	})
	if err == nil && !annotated {
		err = errNoConfig
	}
	return out, err
}

// podModes rewrites one NamespaceOption: TARGET and unknown modes as POD
// (written, not left out, so the field keeps its place), target_id left out.
func podModes(m []byte) ([]byte, error) {
	fs, err := fields(m)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(m))
	for _, f := range fs {
		switch {
		case f.varint(nsNetwork), f.varint(nsPID), f.varint(nsIPC):
			if !Known(runtimeapi.NamespaceMode(int32(f.u))) {
				out = protowire.AppendTag(out, f.num, protowire.VarintType)
				out = protowire.AppendVarint(out, uint64(runtimeapi.NamespaceMode_POD))
				continue
			}
		case f.bytes(nsTargetID):
			continue
		}
		out = append(out, f.raw...)
	}
	return out, nil
}

// ContainerID reads container_id, field 1 of StartContainerRequest,
// RemoveContainerRequest and CreateContainerResponse.
func ContainerID(b []byte) (string, error) {
	id := ""
	err := walk(b, func(f field) error {
		if f.bytes(containerID) {
			id = string(f.val)
		}
		return nil
	})
	return id, err
}
