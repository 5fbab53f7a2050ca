package server

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// A ListContainers answer whose containers carry a label and an annotation
// that are not UTF-8 (containerd keeps them as the client sent them):
// protobuf-go refuses it, the shim's own calls decode it, with the ids,
// states and the other labels as they were.
func TestLenientCodecDecodesStringsThatAreNotUTF8(t *testing.T) {
	resp := &runtimeapi.ListContainersResponse{Containers: []*runtimeapi.Container{
		{Id: "c1", PodSandboxId: "sb1", State: runtimeapi.ContainerState_CONTAINER_RUNNING,
			Labels: map[string]string{"io.cri-containerd.kind": "container", "bad": "~X4~"}, Annotations: map[string]string{"a": "~Y4~"}},
		{Id: "c2", PodSandboxId: "sb1", Metadata: &runtimeapi.ContainerMetadata{Name: "~Z4~"}},
	}}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(resp)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"~X4~", "~Y4~", "~Z4~"} {
		b = bytes.Replace(b, []byte(p), []byte("a\xff\xfeb"), 1)
	}
	if err := proto.Unmarshal(b, new(runtimeapi.ListContainersResponse)); err == nil {
		t.Fatal("protobuf-go decoded strings that are not UTF-8: the test proves nothing")
	}
	got := new(runtimeapi.ListContainersResponse)
	if err := (lenientCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b)}, got); err != nil {
		t.Fatal(err)
	}
	want := proto.Clone(resp).(*runtimeapi.ListContainersResponse)
	want.Containers[0].Labels["bad"] = "a\uFFFDb"
	want.Containers[0].Annotations["a"] = "a\uFFFDb"
	want.Containers[1].Metadata.Name = "a\uFFFDb"
	if !proto.Equal(got, want) {
		t.Errorf("decoded %v\nwant %v", got, want)
	}

	// a well-formed message is left as it is; a broken one keeps its error
	if v, err := validUTF8(b[:len(b)-1], want.ProtoReflect().Descriptor()); err == nil {
		t.Errorf("made %q of a truncated message", v)
	}
	ok, _ := proto.Marshal(want)
	if v, err := validUTF8(ok, want.ProtoReflect().Descriptor()); err != nil || !bytes.Equal(v, ok) {
		t.Errorf("changed a valid message: %v", err)
	}
	if err := (lenientCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(b[:len(b)-1])}, new(runtimeapi.ListContainersResponse)); err == nil {
		t.Error("decoded a truncated message")
	}
}
