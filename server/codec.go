package server

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// frame is one gRPC message, kept as the bytes on the wire, in grpc's own
// (pooled) buffers: a frame received is passed on without a copy. data holds
// references, which Marshal hands to grpc; grpc frees them once written, so a
// frame is sent at most once. Only the methods the shim intercepts copy a
// frame into a []byte (bytes), to decode it.
type frame struct{ data mem.BufferSlice }

func frameOf(b []byte) *frame { return &frame{data: mem.BufferSlice{mem.SliceBuffer(b)}} }

// bytes copies the message out and releases the frame's references.
func (f *frame) bytes() []byte {
	b := f.data.Materialize()
	f.data.Free()
	return b
}

// rawCodec passes frames through without decoding them and encodes anything
// else (health checks, typed backend calls) as protobuf.
type rawCodec struct{ proto encoding.CodecV2 }

func newRawCodec() rawCodec { return rawCodec{proto: encoding.GetCodecV2(proto.Name)} }

func (c rawCodec) Name() string { return proto.Name }

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*frame); ok {
		return f.data, nil
	}
	return c.proto.Marshal(v)
}

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*frame); ok {
		data.Ref() // grpc frees data when Unmarshal returns
		f.data = data
		return nil
	}
	return c.proto.Unmarshal(data, v)
}
