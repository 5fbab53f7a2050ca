package criwire

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/oci"
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

	runtimeHandler = 2 // RunPodSandboxRequest.runtime_handler
	podSandboxID   = 1 // RunPodSandboxResponse and RemovePodSandboxRequest .pod_sandbox_id
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

// Pod is a PodSandboxMetadata's name, uid and namespace: the one the
// shim's records carry.
type Pod = oci.Pod

// Namespaces is a NamespaceOption's modes and target. Strings are the bytes
// sent, UTF-8 or not.
type Namespaces struct {
	Network, PID, IPC runtimeapi.NamespaceMode
	TargetID          string
}

// Forwarded is a CreateContainerRequest the shim acts on, as the backend is
// to get it (RewriteCreate): Plain, and Annotated, with the annotations the
// shim adds.
type Forwarded struct {
	Plain, Annotated []byte
}

// ReadForwarded reads a CreateContainerRequest (ReadCreate) and writes, in
// the same step, its forms as the backend is to get it (RewriteCreate,
// Annotated with add): nil for a request the backend gets as it came, one
// whose namespace modes are all POD, CONTAINER or NODE. An error means b
// does not read: a request that reads can be rewritten (fuzz_test.go).
func ReadForwarded(b []byte, add ...Annotation) (Create, *Forwarded, error) {
	c, err := ReadCreate(b)
	if ns := c.Namespaces; err != nil || ns == nil || Known(ns.PID) && Known(ns.IPC) && Known(ns.Network) {
		return c, nil, err
	}
	fw := &Forwarded{}
	if fw.Plain, err = RewriteCreate(b); err != nil {
		return c, nil, err
	}
	fw.Annotated = fw.Plain
	if len(add) > 0 {
		if fw.Annotated, err = RewriteCreate(b, add...); err != nil {
			return c, nil, err
		}
	}
	return c, fw, nil
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

// RuntimeHandler reads runtime_handler, field 2 of RunPodSandboxRequest
// ("" when absent: the runtime's default).
func RuntimeHandler(b []byte) (string, error) { return lastString(b, runtimeHandler) }

// SandboxID reads pod_sandbox_id, field 1 of RunPodSandboxResponse and
// RemovePodSandboxRequest.
func SandboxID(b []byte) (string, error) { return lastString(b, podSandboxID) }

// lastString reads the string field num of message b: its last occurrence,
// as protobuf does.
func lastString(b []byte, num protowire.Number) (string, error) {
	v := ""
	err := walk(b, func(f field) error {
		if f.bytes(num) {
			v = string(f.val)
		}
		return nil
	})
	return v, err
}

// The wire: fields as they came, and the two ways over them (walk, edit).

// field is one field of a message as it came on the wire.
type field struct {
	num protowire.Number
	typ protowire.Type
	raw []byte // the whole field: tag and value
	val []byte // a length-delimited field's payload (without its length)
	u   uint64 // a varint's value
}

// fields splits message m into its fields, in order. It fails where m is not
// well-formed protobuf (a truncated field, a bad tag, an unmatched group).
func fields(m []byte) ([]field, error) {
	var fs []field
	for off := 0; off < len(m); {
		num, typ, n := protowire.ConsumeTag(m[off:])
		if n < 0 {
			return nil, fmt.Errorf("at byte %d: %w", off, protowire.ParseError(n))
		}
		vn := protowire.ConsumeFieldValue(num, typ, m[off+n:])
		if vn < 0 {
			return nil, fmt.Errorf("field %d at byte %d: %w", num, off, protowire.ParseError(vn))
		}
		f := field{num: num, typ: typ, raw: m[off : off+n+vn]}
		switch typ {
		case protowire.BytesType:
			f.val, _ = protowire.ConsumeBytes(m[off+n:])
		case protowire.VarintType:
			f.u, _ = protowire.ConsumeVarint(m[off+n:])
		}
		fs = append(fs, f)
		off += n + vn
	}
	return fs, nil
}

// bytes reports whether f is field num declared length-delimited (a string or
// a message): with another wire type, protobuf keeps it as an unknown field.
func (f field) bytes(num protowire.Number) bool {
	return f.num == num && f.typ == protowire.BytesType
}

// varint: f is field num declared as a varint (an enum, a uint32).
func (f field) varint(num protowire.Number) bool {
	return f.num == num && f.typ == protowire.VarintType
}

// walk calls fn for every field of m, in order.
func walk(m []byte, fn func(field) error) error {
	fs, err := fields(m)
	if err != nil {
		return err
	}
	for _, f := range fs {
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// edit returns m with the payload p of every occurrence of the
// length-delimited field num replaced by fn(p, last), last telling the last
// occurrence; every other field is copied as it came, in its place.
func edit(m []byte, num protowire.Number, fn func(p []byte, last bool) ([]byte, error)) ([]byte, error) {
	fs, err := fields(m)
	if err != nil {
		return nil, err
	}
	last := -1
	for i, f := range fs {
		if f.bytes(num) {
			last = i
		}
	}
	out := make([]byte, 0, len(m)+64)
	for i, f := range fs {
		if !f.bytes(num) {
			out = append(out, f.raw...)
			continue
		}
		p, err := fn(f.val, i == last)
		if err != nil {
			return nil, fmt.Errorf("field %d: %w", num, err)
		}
		out = protowire.AppendTag(out, num, protowire.BytesType)
		out = protowire.AppendBytes(out, p)
	}
	return out, nil
}
