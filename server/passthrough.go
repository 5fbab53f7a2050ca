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
// until the backend ends it, or the server shuts down, grpc-proxy's way: one
// forwarder per direction, and this handler deciding what their ends mean.
// The client's end of its side (io.EOF) closes the backend's side
// (CloseSend); any other failure to read the client cancels the backend
// call. The backend's header, trailer and status are relayed unchanged.
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
	toBackend := forwardToBackend(ss, cs)
	toClient := forwardToClient(cs, ss)
	for {
		select {
		case err := <-toBackend:
			toBackend = nil // the client's side is done; the backend's goes on
			switch {
			case errors.Is(err, io.EOF):
				cs.CloseSend()
			case !errors.Is(err, errBackendEnded):
				cancel()
			}
		case err := <-toClient:
			return err
		}
	}
}

// errBackendEnded: the backend took no more messages; it ended the call,
// and its status comes from its side (forwardToClient).
var errBackendEnded = errors.New("the backend ended the call")

// forwardToBackend copies the client's messages to the backend until the
// client's side ends (its error, io.EOF when it closed its side) or the
// backend takes no more (errBackendEnded).
func forwardToBackend(src grpc.ServerStream, dst grpc.ClientStream) <-chan error {
	done := make(chan error, 1)
	go func() {
		for {
			f := new(frame)
			if err := src.RecvMsg(f); err != nil {
				done <- err
				return
			}
			if err := dst.SendMsg(f); err != nil {
				done <- errBackendEnded
				return
			}
		}
	}()
	return done
}

// forwardToClient copies the backend's header (with its first message, or
// none), messages and trailer to the client until the backend ends the
// call: nil when it ended with OK, else its status; or the client's stream
// fails.
func forwardToClient(src grpc.ClientStream, dst grpc.ServerStream) <-chan error {
	done := make(chan error, 1)
	go func() {
		done <- func() error {
			headerSent := false
			for {
				f := new(frame)
				err := src.RecvMsg(f)
				if !headerSent && err == nil {
					hdr, herr := src.Header()
					if herr == nil && len(hdr) > 0 {
						if err := dst.SendHeader(hdr); err != nil {
							return err
						}
					}
					headerSent = true
				}
				if err != nil {
					dst.SetTrailer(src.Trailer())
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
				if err := dst.SendMsg(f); err != nil {
					return err
				}
			}
		}()
	}()
	return done
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
