package server

import (
	"bytes"
	"context"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/nriplugin"
)

// rawBytesCodec sends a []byte as the message: what cri-api's Go types
// cannot encode reaches the shim as a kubelet on the current wire sends it.
type rawBytesCodec struct{}

func (rawBytesCodec) Name() string                  { return "proto" }
func (rawBytesCodec) Marshal(v any) ([]byte, error) { return *(v.(*[]byte)), nil }
func (rawBytesCodec) Unmarshal(b []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), b...)
	return nil
}

// wireUnknown is a run of fields no cri-api declares, one of each wire
// type, with a string that is not UTF-8.
func wireUnknown() protoreflect.RawFields {
	b := protowire.AppendVarint(protowire.AppendTag(nil, 1000, protowire.VarintType), 7)
	b = protowire.AppendString(protowire.AppendTag(b, 1001, protowire.BytesType), "\xff\xfe")
	b = protowire.AppendFixed64(protowire.AppendTag(b, 1003, protowire.Fixed64Type), 6)
	return protowire.AppendFixed32(protowire.AppendTag(b, 1002, protowire.Fixed32Type), 5)
}

// wireRequest is a CreateContainerRequest as a current kubelet may send it:
// an env value, an annotation, a label and a mount path that are not UTF-8
// (4-byte placeholders swapped after marshalling), and unknown fields at
// every depth. ns is its namespace_options; nsUnknown goes at their end
// (where the test writes a rewritten mode), configTail at the end of the
// config (where the NRI token goes).
func wireRequest(t *testing.T, ns *runtimeapi.NamespaceOption, nsUnknown, configTail []byte) []byte {
	t.Helper()
	ns = proto.Clone(ns).(*runtimeapi.NamespaceOption)
	cfg := &runtimeapi.ContainerConfig{
		Metadata:    &runtimeapi.ContainerMetadata{Name: "debugger", Attempt: 2},
		Image:       &runtimeapi.ImageSpec{Image: "busybox"},
		Envs:        []*runtimeapi.KeyValue{{Key: "BLOB", Value: []byte("~E4~")}},
		Mounts:      []*runtimeapi.Mount{{ContainerPath: "/m", HostPath: "/h/~M4~"}},
		Labels:      map[string]string{"l~L4~": "v"},
		Annotations: map[string]string{"a": "~A4~"},
		Linux:       &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}},
	}
	req := &runtimeapi.CreateContainerRequest{PodSandboxId: "sb1", Config: cfg,
		SandboxConfig: &runtimeapi.PodSandboxConfig{Labels: map[string]string{"p": "~P4~"}}}
	sc := cfg.Linux.SecurityContext
	for _, m := range []proto.Message{req, cfg.Metadata, cfg.Mounts[0], cfg.Linux, sc} {
		m.ProtoReflect().SetUnknown(wireUnknown())
	}
	ns.ProtoReflect().SetUnknown(append(append([]byte(nil), nsUnknown...), wireUnknown()...))
	cfg.ProtoReflect().SetUnknown(append(wireUnknown(), configTail...))
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"~E4~", "~M4~", "~L4~", "~A4~", "~P4~"} {
		if bytes.Count(b, []byte(p)) != 1 {
			t.Fatalf("placeholder %s", p)
		}
		b = bytes.Replace(b, []byte(p), []byte("\xff\xfea\xc3"), 1)
	}
	return b
}

// What the backend receives of a CreateContainer through the shim is what
// was sent, byte for byte, but for what targeting changes: TARGET written
// as POD in its place, target_id gone, and on the NRI path the token after
// the config's last field. Invalid UTF-8 and unknown fields at any depth
// pass as they came, on both paths.
func TestCreateForwardsWhatItWasSent(t *testing.T) {
	pod := protowire.AppendVarint(protowire.AppendTag(nil, 2, protowire.VarintType), 0) // pid: POD
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		for _, tc := range []struct {
			desc     string
			ns       *runtimeapi.NamespaceOption
			want     *runtimeapi.NamespaceOption // known fields of what the backend gets
			rewrites bool                        // pid comes back as POD, written
		}{
			{"plain", &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}, &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER}, false},
			{"no TARGET, a user namespace", &runtimeapi.NamespaceOption{Ipc: runtimeapi.NamespaceMode_POD, UsernsOptions: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD}},
				&runtimeapi.NamespaceOption{UsernsOptions: &runtimeapi.UserNamespace{Mode: runtimeapi.NamespaceMode_POD}}, false},
			{"pid TARGET", &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: "app1", Network: runtimeapi.NamespaceMode_NODE},
				&runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE}, true},
		} {
			t.Run(tc.desc, func(t *testing.T) {
				r := newRig(t, false)
				r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
				sent := wireRequest(t, tc.ns, nil, nil)
				var out []byte
				if err := r.shim.Invoke(context.Background(), "/runtime.v1.RuntimeService/CreateContainer", &sent, &out, grpc.ForceCodec(rawBytesCodec{})); err != nil {
					t.Fatal(err)
				}
				got := r.backend.createdRaw[0]
				want := sent
				if tc.rewrites {
					// pid written as POD in its place, no target_id
					var tail []byte
					if token := r.backend.created[0].GetConfig().GetAnnotations()[nriplugin.AnnotationRequest]; r.nri != nil {
						if token == "" {
							t.Fatal("no token on the NRI path")
						}
						entry := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), nriplugin.AnnotationRequest)
						entry = protowire.AppendString(protowire.AppendTag(entry, 2, protowire.BytesType), token)
						tail = protowire.AppendBytes(protowire.AppendTag(nil, 10, protowire.BytesType), entry)
					}
					// known fields marshal first, so the POD written for
					// pid (2) follows network (1), before the unknown ones
					want = wireRequest(t, tc.want, pod, tail)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("the backend got other bytes than meant:\n got %q\nwant %q", got, want)
				}
			})
		}
	})
}
