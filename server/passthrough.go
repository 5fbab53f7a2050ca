package server

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// forwardFunc sends one unary request to the backend as raw bytes.
type forwardFunc func(ctx context.Context, req []byte) ([]byte, error)

// hook intercepts one unary method. It may decode req, call fwd (at most
// once) with the same or rewritten bytes, and do side effects around it.
type hook func(ctx context.Context, req []byte, fwd forwardFunc) ([]byte, error)

// proxy forwards raw frames to the backend connection, grpc-proxy's way:
// metadata, deadline and cancellation come from the caller's context, and
// the backend's statuses go back unchanged.
type proxy struct {
	backend *grpc.ClientConn
	codec   rawCodec
	// stopping is done once the server shuts down: streams, which never end
	// by themselves (GetContainerEvents), end then with Unavailable, so that
	// shutdown does not wait for them and their clients subscribe again.
	stopping context.Context
}

// unary forwards one unary call made on the server context ctx, running h
// around the forward when set; the backend's header and trailer go back to
// the caller. Without a hook the frames pass through uncopied.
func (p *proxy) unary(ctx context.Context, method string, in *frame, h hook) (*frame, error) {
	srvCtx := ctx
	invoke := func(ctx context.Context, req *frame) (*frame, error) {
		var hdr, trl metadata.MD
		out := new(frame)
		err := p.backend.Invoke(ctx, method, req, out,
			grpc.ForceCodecV2(p.codec), grpc.Header(&hdr), grpc.Trailer(&trl))
		if len(trl) > 0 {
			grpc.SetTrailer(srvCtx, trl)
		}
		if err != nil {
			return nil, err
		}
		if len(hdr) > 0 {
			if err := grpc.SetHeader(srvCtx, hdr); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	ctx = outgoing(ctx)
	if h == nil {
		return invoke(ctx, in)
	}
	fwd := func(ctx context.Context, req []byte) ([]byte, error) {
		out, err := invoke(ctx, frameOf(req))
		if err != nil {
			return nil, err
		}
		return out.bytes(), nil
	}
	out, err := h(ctx, in.bytes(), fwd)
	if err != nil {
		return nil, err
	}
	return frameOf(out), nil
}

// stream pipes a call of any shape (server streaming such as
// GetContainerEvents, or a method unknown to this build) in both directions
// until the backend ends it, or the server shuts down; the backend's
// header, trailer and status are relayed unchanged.
func (p *proxy) stream(ss grpc.ServerStream, method string) (err error) {
	ctx, cancel := context.WithCancel(outgoing(ss.Context()))
	defer cancel()
	stop := context.AfterFunc(p.stopping, cancel)
	defer func() {
		if !stop() && ss.Context().Err() == nil {
			err = status.Error(codes.Unavailable, "cri-nstarget is shutting down: subscribe again")
		}
	}()
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

// outgoing makes the caller's metadata the backend call's. What grpc sets
// per connection (":authority", "content-type", "user-agent", "te") is in it
// too; the client transport leaves such reserved headers out itself, so no
// copy is needed here. The deadline and cancellation come with ctx.
func outgoing(ctx context.Context) context.Context {
	md, ok := metadata.FromIncomingContext(ctx)
	if !ok {
		return ctx
	}
	return metadata.NewOutgoingContext(ctx, md)
}
