package server

import (
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
)

// frame is one gRPC message, kept as the bytes on the wire.
type frame struct{ payload []byte }

// rawCodec passes frames through without decoding them and encodes anything
// else (health checks, typed backend calls) as protobuf.
type rawCodec struct{ proto encoding.CodecV2 }

func newRawCodec() rawCodec { return rawCodec{proto: encoding.GetCodecV2(proto.Name)} }

func (c rawCodec) Name() string { return proto.Name }

func (c rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	if f, ok := v.(*frame); ok {
		return mem.BufferSlice{mem.SliceBuffer(f.payload)}, nil
	}
	return c.proto.Marshal(v)
}

func (c rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if f, ok := v.(*frame); ok {
		f.payload = data.Materialize()
		return nil
	}
	return c.proto.Unmarshal(data, v)
}
