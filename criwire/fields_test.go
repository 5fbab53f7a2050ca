package criwire

import (
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// The field numbers and kinds this package reads and writes are those of the
// cri-api the module builds with.
func TestFieldNumbers(t *testing.T) {
	for _, tc := range []struct {
		msg  proto.Message
		name protoreflect.Name
		num  protowire.Number
		kind protoreflect.Kind
	}{
		{&runtimeapi.CreateContainerRequest{}, "pod_sandbox_id", createSandboxID, protoreflect.StringKind},
		{&runtimeapi.CreateContainerRequest{}, "config", createConfig, protoreflect.MessageKind},
		{&runtimeapi.CreateContainerRequest{}, "sandbox_config", createSandboxConfig, protoreflect.MessageKind},
		{&runtimeapi.PodSandboxConfig{}, "metadata", sandboxMetadata, protoreflect.MessageKind},
		{&runtimeapi.PodSandboxMetadata{}, "name", podName, protoreflect.StringKind},
		{&runtimeapi.PodSandboxMetadata{}, "uid", podUID, protoreflect.StringKind},
		{&runtimeapi.PodSandboxMetadata{}, "namespace", podNamespace, protoreflect.StringKind},
		{&runtimeapi.ContainerConfig{}, "metadata", configMetadata, protoreflect.MessageKind},
		{&runtimeapi.ContainerConfig{}, "annotations", configAnnotations, protoreflect.MessageKind},
		{&runtimeapi.ContainerConfig{}, "linux", configLinux, protoreflect.MessageKind},
		{&runtimeapi.ContainerMetadata{}, "name", metadataName, protoreflect.StringKind},
		{&runtimeapi.ContainerMetadata{}, "attempt", metadataAttempt, protoreflect.Uint32Kind},
		{&runtimeapi.LinuxContainerConfig{}, "security_context", linuxSecurityContext, protoreflect.MessageKind},
		{&runtimeapi.LinuxContainerSecurityContext{}, "namespace_options", securityNamespaces, protoreflect.MessageKind},
		{&runtimeapi.NamespaceOption{}, "network", nsNetwork, protoreflect.EnumKind},
		{&runtimeapi.NamespaceOption{}, "pid", nsPID, protoreflect.EnumKind},
		{&runtimeapi.NamespaceOption{}, "ipc", nsIPC, protoreflect.EnumKind},
		{&runtimeapi.NamespaceOption{}, "target_id", nsTargetID, protoreflect.StringKind},
		{&runtimeapi.StartContainerRequest{}, "container_id", containerID, protoreflect.StringKind},
		{&runtimeapi.RemoveContainerRequest{}, "container_id", containerID, protoreflect.StringKind},
		{&runtimeapi.CreateContainerResponse{}, "container_id", containerID, protoreflect.StringKind},
		{&runtimeapi.RunPodSandboxRequest{}, "runtime_handler", runtimeHandler, protoreflect.StringKind},
		{&runtimeapi.RunPodSandboxResponse{}, "pod_sandbox_id", podSandboxID, protoreflect.StringKind},
		{&runtimeapi.RemovePodSandboxRequest{}, "pod_sandbox_id", podSandboxID, protoreflect.StringKind},
	} {
		md := tc.msg.ProtoReflect().Descriptor()
		fd := md.Fields().ByName(tc.name)
		if fd == nil {
			t.Errorf("%s has no field %s", md.FullName(), tc.name)
			continue
		}
		if fd.Number() != tc.num || fd.Kind() != tc.kind || fd.Cardinality() == protoreflect.Repeated != fd.IsMap() {
			t.Errorf("%s.%s is %d %v (map %v); this package has %d %v", md.FullName(), tc.name, fd.Number(), fd.Kind(), fd.IsMap(), tc.num, tc.kind)
		}
	}
	entry := (&runtimeapi.ContainerConfig{}).ProtoReflect().Descriptor().Fields().ByName("annotations").Message()
	if entry.Fields().ByNumber(entryKey).Kind() != protoreflect.StringKind || entry.Fields().ByNumber(entryValue).Kind() != protoreflect.StringKind {
		t.Errorf("annotations entry is %v", entry.FullName())
	}
	for m, want := range map[runtimeapi.NamespaceMode]bool{0: true, 1: true, 2: true, 3: false, 4: false, -1: false} {
		if Known(m) != want {
			t.Errorf("Known(%v) = %v", m, !want)
		}
	}
	if runtimeapi.NamespaceMode_TARGET != 3 {
		t.Errorf("TARGET is %d", runtimeapi.NamespaceMode_TARGET)
	}
}
