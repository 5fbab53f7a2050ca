package server

import (
	"context"
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	protocodec "google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// lenientConn is a connection for the shim's own typed calls (the
// backend's CRI, containerd's API): their answers decode even where a string
// field is not UTF-8. A container's labels and annotations are stored as
// the client sent them, and protobuf-go refuses to decode such a string:
// one pod with such a label must not stop the shim from listing containers,
// resolving targets or sweeping pins. The shim reads ids, states, its own
// annotations and specs from these answers, never writes a decoded label
// back, and forwards nothing it decoded this way.
type lenientConn struct{ grpc.ClientConnInterface }

func (c lenientConn) Invoke(ctx context.Context, method string, args, reply any, opts ...grpc.CallOption) error {
	return c.ClientConnInterface.Invoke(ctx, method, args, reply, append(opts, grpc.ForceCodecV2(lenientCodec{}))...)
}

func (c lenientConn) NewStream(ctx context.Context, desc *grpc.StreamDesc, method string, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	return c.ClientConnInterface.NewStream(ctx, desc, method, append(opts, grpc.ForceCodecV2(lenientCodec{}))...)
}

// lenientCodec is grpc's protobuf codec, but for decoding: a message that
// protobuf-go refuses is decoded again with every string field that is not
// UTF-8 made valid (each run of bad bytes U+FFFD).
type lenientCodec struct{}

var protoCodec = encoding.GetCodecV2(protocodec.Name)

func (lenientCodec) Name() string                           { return protocodec.Name }
func (lenientCodec) Marshal(v any) (mem.BufferSlice, error) { return protoCodec.Marshal(v) }

func (lenientCodec) Unmarshal(data mem.BufferSlice, v any) error {
	err := protoCodec.Unmarshal(data, v)
	m, ok := v.(proto.Message)
	if err == nil || !ok {
		return err
	}
	valid, verr := validUTF8(data.Materialize(), m.ProtoReflect().Descriptor())
	if verr != nil {
		return err
	}
	proto.Reset(m)
	return proto.Unmarshal(valid, m)
}

// validUTF8 returns message b of type md with every string field, at any
// depth, made valid UTF-8; every other field is copied as it came.
func validUTF8(b []byte, md protoreflect.MessageDescriptor) ([]byte, error) {
	out := make([]byte, 0, len(b))
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil, protowire.ParseError(n)
		}
		vn := protowire.ConsumeFieldValue(num, typ, b[n:])
		if vn < 0 {
			return nil, protowire.ParseError(vn)
		}
		fd := md.Fields().ByNumber(num)
		if typ != protowire.BytesType || fd == nil {
			out = append(out, b[:n+vn]...)
			b = b[n+vn:]
			continue
		}
		val, _ := protowire.ConsumeBytes(b[n:])
		switch fd.Kind() {
		case protoreflect.StringKind:
			if !utf8.Valid(val) {
				val = []byte(strings.ToValidUTF8(string(val), "\uFFFD"))
			}
		case protoreflect.MessageKind:
			v, err := validUTF8(val, fd.Message())
			if err != nil {
				return nil, fmt.Errorf("field %d: %w", num, err)
			}
			val = v
		}
		out = protowire.AppendBytes(protowire.AppendTag(out, num, typ), val)
		b = b[n+vn:]
	}
	return out, nil
}
