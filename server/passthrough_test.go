package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// TestPassthrough runs one set of assertions against the fake backend
// directly and through the shim: what a client sees must be the same.
func TestPassthrough(t *testing.T) {
	r := newRig(t, false)
	for _, tc := range []struct {
		name string
		conn *grpc.ClientConn
	}{{"direct", r.direct}, {"shim", r.shim}} {
		t.Run(tc.name, func(t *testing.T) { checkPassthrough(t, r.backend, tc.conn) })
	}
}

func checkPassthrough(t *testing.T, b *fakeBackend, conn *grpc.ClientConn) {
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	img := runtimeapi.NewImageServiceClient(conn)

	t.Run("unary response, header, trailer, metadata, deadline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 7*time.Second)
		defer cancel()
		ctx = metadata.AppendToOutgoingContext(ctx, "x-caller", "kubelet")
		var hdr, trl metadata.MD
		v, err := rt.Version(ctx, &runtimeapi.VersionRequest{Version: "v1"}, grpc.Header(&hdr), grpc.Trailer(&trl))
		if err != nil {
			t.Fatal(err)
		}
		want := &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "1", RuntimeApiVersion: "v1"}
		if !proto.Equal(v, want) {
			t.Errorf("Version = %v, want %v", v, want)
		}
		if got := hdr.Get("x-backend-header"); len(got) != 1 || got[0] != "h" {
			t.Errorf("header = %v", hdr)
		}
		if got := trl.Get("x-backend-trailer"); len(got) != 1 || got[0] != "t" {
			t.Errorf("trailer = %v", trl)
		}
		b.mu.Lock()
		md, dl := b.lastMD, b.lastDL
		b.mu.Unlock()
		if got := md.Get("x-caller"); len(got) != 1 || got[0] != "kubelet" {
			t.Errorf("backend metadata = %v, want x-caller: kubelet", md)
		}
		if left := time.Until(dl); left <= 0 || left > 7*time.Second {
			t.Errorf("backend deadline %v away, want within 7s", left)
		}
	})

	t.Run("status code, message and details unchanged", func(t *testing.T) {
		_, err := rt.ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: "nope"})
		st := status.Convert(err)
		if st.Code() != codes.NotFound || st.Message() != "no such container nope" || len(st.Details()) != 1 {
			t.Errorf("status = %v %q details=%d, want NotFound with 1 detail", st.Code(), st.Message(), len(st.Details()))
		}
	})

	t.Run("unimplemented stays unimplemented", func(t *testing.T) {
		_, err := rt.ReopenContainerLog(context.Background(), &runtimeapi.ReopenContainerLogRequest{ContainerId: "c"})
		if status.Code(err) != codes.Unimplemented {
			t.Errorf("code = %v, want Unimplemented", status.Code(err))
		}
	})

	t.Run("server streaming with final status", func(t *testing.T) {
		s, err := rt.GetContainerEvents(context.Background(), &runtimeapi.GetEventsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		for {
			ev, err := s.Recv()
			if err != nil {
				if status.Code(err) != codes.Aborted || n != 3 {
					t.Errorf("after %d events: %v, want 3 events then Aborted", n, err)
				}
				break
			}
			if ev.GetCreatedAt() != n {
				t.Errorf("event %d has created_at %d", n, ev.GetCreatedAt())
			}
			n++
		}
	})

	t.Run("image service", func(t *testing.T) {
		l, err := img.ListImages(context.Background(), &runtimeapi.ListImagesRequest{})
		if err != nil || len(l.GetImages()) != 1 || l.GetImages()[0].GetRepoTags()[0] != "busybox:1" {
			t.Errorf("ListImages = %v %v", l, err)
		}
	})

	t.Run("method unknown to this build", func(t *testing.T) {
		out := new(runtimeapi.VersionResponse)
		err := conn.Invoke(context.Background(), "/runtime.v1.RuntimeService/FutureRPC", &runtimeapi.VersionRequest{Version: "x"}, out)
		if err != nil || out.GetVersion() != "future:x" {
			t.Errorf("FutureRPC = %v %v, want future:x", out, err)
		}
	})
}

// TestPassthroughRawBytes checks the shim forwards a response's bytes as they
// are, including fields this build's cri-api does not know.
func TestPassthroughRawBytes(t *testing.T) {
	r := newRig(t, false)
	unknownField := []byte{0xfa, 0x3e, 0x03, 'n', 'e', 'w'} // field 999, length-delimited "new"
	req := append([]byte{0x0a, 0x01, 'x'}, unknownField...) // VersionRequest{version:"x"} + unknown field
	in, out := frameOf(req), new(frame)
	err := r.shim.Invoke(context.Background(), "/runtime.v1.RuntimeService/FutureRPC", in, out, grpc.ForceCodecV2(newRawCodec()))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := proto.Marshal(&runtimeapi.VersionResponse{Version: "future:x"})
	if got := out.bytes(); string(got) != string(want) {
		t.Errorf("response bytes = %x, want %x", got, want)
	}
}

// TestPassthroughCancellation: a caller that gives up cancels the backend
// call, and the shim leaks no goroutine.
func TestPassthroughCancellation(t *testing.T) {
	r := newRig(t, false)
	// connect both hops first: connection goroutines are not leaks
	if _, err := runtimeapi.NewRuntimeServiceClient(r.shim).Version(context.Background(), &runtimeapi.VersionRequest{}); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithCancel(context.Background())
		s, err := runtimeapi.NewRuntimeServiceClient(r.shim).GetContainerEvents(ctx, &runtimeapi.GetEventsRequest{})
		if err != nil {
			t.Fatal(err)
		}
		s.Recv()
		cancel()
		for {
			if _, err := s.Recv(); err != nil {
				if !errors.Is(err, io.EOF) && status.Code(err) != codes.Canceled && status.Code(err) != codes.Aborted {
					t.Errorf("after cancel: %v", err)
				}
				break
			}
		}
	}
	waitFor(t, fmt.Sprintf("the goroutines of 20 cancelled streams to end (%d before)", before), func() bool {
		return runtime.NumGoroutine() <= before+2
	})
}
