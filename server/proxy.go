package server

import (
	"context"
	"errors"
	"io"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// forwardFunc sends one unary request to the backend as raw bytes.
type forwardFunc func(ctx context.Context, req []byte) ([]byte, error)

// hook intercepts one unary method. It may decode req, call fwd (at most
// once) with the same or rewritten bytes, and do side effects around it.
type hook func(ctx context.Context, req []byte, fwd forwardFunc) ([]byte, error)

// unaryMethods are the full method names that cri-api declares unary. Every
// other method, known or not, is piped as a bidirectional stream, which is
// also correct on the wire for unary methods this cri-api does not know.
var unaryMethods = func() map[string]bool {
	m := map[string]bool{}
	for _, sd := range []grpc.ServiceDesc{runtimeapi.RuntimeService_ServiceDesc, runtimeapi.ImageService_ServiceDesc} {
		for _, md := range sd.Methods {
			m["/"+sd.ServiceName+"/"+md.MethodName] = true
		}
	}
	return m
}()

// proxy forwards raw frames to the backend connection.
type proxy struct {
	backend *grpc.ClientConn
	codec   rawCodec
}

// unary relays one unary call, running h around the forward when set.
func (p *proxy) unary(ss grpc.ServerStream, method string, h hook) error {
	in := new(frame)
	if err := ss.RecvMsg(in); err != nil {
		return err
	}
	ctx := outgoing(ss.Context())
	fwd := func(ctx context.Context, req []byte) ([]byte, error) {
		var hdr, trl metadata.MD
		out := new(frame)
		err := p.backend.Invoke(ctx, method, &frame{payload: req}, out,
			grpc.ForceCodecV2(p.codec), grpc.Header(&hdr), grpc.Trailer(&trl))
		ss.SetTrailer(trl)
		if err != nil {
			return nil, err
		}
		if len(hdr) > 0 {
			if err := ss.SetHeader(hdr); err != nil {
				return nil, err
			}
		}
		return out.payload, nil
	}
	var out []byte
	var err error
	if h != nil {
		out, err = h(ctx, in.payload, fwd)
	} else {
		out, err = fwd(ctx, in.payload)
	}
	if err != nil {
		return err
	}
	return ss.SendMsg(&frame{payload: out})
}

// stream pipes a call of any shape (server streaming such as
// GetContainerEvents, or a method unknown to this build) in both directions
// until the backend ends it; the backend's header, trailer and status are
// relayed unchanged.
func (p *proxy) stream(ss grpc.ServerStream, method string) error {
	ctx, cancel := context.WithCancel(outgoing(ss.Context()))
	defer cancel()
	cs, err := p.backend.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method, grpc.ForceCodecV2(p.codec))
	if err != nil {
		return err
	}
	go func() {
		for {
			f := new(frame)
			if err := ss.RecvMsg(f); err != nil {
				if errors.Is(err, io.EOF) {
					cs.CloseSend()
				} else {
					cancel()
				}
				return
			}
			if err := cs.SendMsg(f); err != nil {
				return // the backend ended the call: its status comes from RecvMsg below
			}
		}
	}()
	headerSent := false
	for {
		f := new(frame)
		err := cs.RecvMsg(f)
		if !headerSent && err == nil {
			hdr, herr := cs.Header()
			if herr == nil && len(hdr) > 0 {
				if err := ss.SendHeader(hdr); err != nil {
					return err
				}
			}
			headerSent = true
		}
		if err != nil {
			ss.SetTrailer(cs.Trailer())
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if err := ss.SendMsg(f); err != nil {
			return err
		}
	}
}

// outgoing turns the caller's metadata into the backend call's, leaving out
// what grpc sets per connection. The deadline and cancellation come with ctx.
func outgoing(ctx context.Context) context.Context {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok || len(md) == 0 {
		return ctx
	}
	out := make(metadata.MD, len(md))
	for k, v := range md {
		if strings.HasPrefix(k, ":") || k == "content-type" || k == "user-agent" || k == "te" {
			continue
		}
		out[k] = v
	}
	return metadata.NewOutgoingContext(ctx, out)
}
