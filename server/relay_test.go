package server

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

func (r *rig) relays() int {
	r.server.conns.mu.Lock()
	defer r.server.conns.mu.Unlock()
	return len(r.server.conns.relays)
}

// A client connection is relayed when the backend can be dialled, and
// served by the grpc.Server when it cannot; both answer.
func TestRelayOrFallback(t *testing.T) {
	r := newRig(t, false)
	rt := runtimeapi.NewRuntimeServiceClient(r.shim)
	if _, err := rt.Version(context.Background(), &runtimeapi.VersionRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := r.relays(); n != 1 {
		t.Fatalf("relayed connections = %d, want 1", n)
	}
	r.backendDown.Store(true)
	conn := dialMem(t, r.shimLis)
	v, err := runtimeapi.NewRuntimeServiceClient(conn).Version(context.Background(), &runtimeapi.VersionRequest{})
	if err != nil || v.GetRuntimeName() != "fake" {
		t.Fatalf("Version on a fallback connection = %v, %v", v, err)
	}
	if got := r.server.ConnCounts(); got["relayed"] != 1 || got["grpc"] != 1 {
		t.Errorf("ConnCounts = %v, want 1 relayed, 1 grpc", got)
	}
	conn.Close()
	for deadline := time.Now().Add(5 * time.Second); r.server.ConnCounts()["grpc"] != 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("ConnCounts after the fallback connection closed = %v", r.server.ConnCounts())
		}
	}
}

// A connection served by the grpc.Server while the backend could not be
// dialled is closed gracefully after its age (New: fallbackAge); the
// client's next connection is relayed again, and no call fails on the way.
func TestFallbackRecycled(t *testing.T) {
	r := newRigWith(t, false, fallbackKeepalive(300*time.Millisecond))
	r.backendDown.Store(true)
	conn := dialMem(t, r.shimLis)
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	if _, err := rt.Version(context.Background(), &runtimeapi.VersionRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := r.relays(); n != 0 {
		t.Fatalf("relayed connections = %d while the backend is down, want 0", n)
	}
	r.backendDown.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for r.relays() == 0 {
		if _, err := rt.Version(context.Background(), &runtimeapi.VersionRequest{}); err != nil {
			t.Fatalf("Version while the connection is recycled: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("the client's connection was never relayed again")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// The shim's own answers (hooks, health) share the client connection's
// flow-control window with large backend answers. With windows held at
// 64 KiB (no BDP growth), many large ListContainers answers and intercepted
// calls with large requests run at once: every call must succeed, and the
// connection must survive (a window overrun is a connection error).
func TestRelayFlowControl(t *testing.T) {
	r := newRig(t, false)
	r.addLargeContainers(1500)
	conn, err := grpc.NewClient("passthrough:///mem",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return r.shimLis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(65535), grpc.WithInitialConnWindowSize(65535))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	envs := make([]*runtimeapi.KeyValue, 2000) // a request of about 200 KiB, more than a window
	for i := range envs {
		envs[i] = &runtimeapi.KeyValue{Key: fmt.Sprintf("K%d", i), Value: strings.Repeat("v", 90)}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := 0; g < 6; g++ {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				resp, err := rt.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{})
				if err == nil && len(resp.GetContainers()) < 1500 {
					err = fmt.Errorf("%d containers", len(resp.GetContainers()))
				}
				if err != nil {
					errs <- fmt.Errorf("ListContainers: %w", err)
					return
				}
			}
		}()
		go func() {
			defer wg.Done()
			for i := 0; i < 8; i++ {
				_, err := rt.CreateContainer(context.Background(), &runtimeapi.CreateContainerRequest{PodSandboxId: "pod",
					Config: &runtimeapi.ContainerConfig{Metadata: &runtimeapi.ContainerMetadata{Name: "big"}, Envs: envs}})
				if err != nil {
					errs <- fmt.Errorf("CreateContainer: %w", err)
					return
				}
				if _, err := rt.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: "nope"}); err != nil {
					errs <- fmt.Errorf("StartContainer: %w", err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	r.backend.mu.Lock()
	created := len(r.backend.created)
	r.backend.mu.Unlock()
	if created != 48 {
		t.Errorf("backend created %d containers, want 48", created)
	}
}

// A compressed request to a method the shim answers itself is refused
// clearly; the backend never sees it.
func TestRelayCompressedIntercepted(t *testing.T) {
	r := newRig(t, false)
	rt := runtimeapi.NewRuntimeServiceClient(r.shim)
	_, err := rt.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: "c"}, grpc.UseCompressor(gzip.Name))
	if status.Code(err) != codes.Unimplemented {
		t.Errorf("compressed StartContainer = %v, want Unimplemented", err)
	}
	if _, err := rt.Version(context.Background(), &runtimeapi.VersionRequest{}, grpc.UseCompressor(gzip.Name)); err != nil {
		t.Errorf("compressed Version (relayed to the backend) = %v", err)
	}
	if len(r.backend.started) != 0 {
		t.Errorf("backend started %v", r.backend.started)
	}
}

func TestParseTimeout(t *testing.T) {
	for in, want := range map[string]string{"100m": "100ms", "5S": "5s", "2H": "2h0m0s", "7u": "7µs", "1n": "1ns"} {
		if d, err := parseTimeout(in); err != nil || d.String() != want {
			t.Errorf("parseTimeout(%q) = %v, %v; want %s", in, d, err, want)
		}
	}
	for _, bad := range []string{"", "5", "5x", "-1S", "S"} {
		if _, err := parseTimeout(bad); err == nil {
			t.Errorf("parseTimeout(%q) succeeded", bad)
		}
	}
	if got := encodeGrpcMessage("a 100% ü\n"); got != "a 100%25 %C3%BC%0A" {
		t.Errorf("encodeGrpcMessage = %q", got)
	}
}

// A strict HTTP/2 client (grpc-go does not check its connection window):
// it grants only 64 KiB at the connection level and credits lazily, while
// large backend answers and the shim's own answers share that window. It
// must never receive more than it granted, and every call must succeed.
func TestRelayConnectionWindowStrict(t *testing.T) {
	r := newRig(t, false)
	r.addLargeContainers(600)
	c := dialRaw(t, r.shimLis)
	fr := c.fr
	const calls = 30
	for i := 0; i < calls; i++ {
		sid := uint32(2*i + 1)
		if i%2 == 0 {
			c.call(sid, "/runtime.v1.RuntimeService/ListContainers", &runtimeapi.ListContainersRequest{})
		} else {
			c.call(sid, "/runtime.v1.RuntimeService/StartContainer", &runtimeapi.StartContainerRequest{ContainerId: "x"})
		}
		fr.WriteWindowUpdate(sid, 8<<20) // streams are not the limit here; the connection is
	}
	window, consumed := int64(65535), int64(0)
	ended := map[uint32]string{}
	for len(ended) < calls {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("after %d calls ended: %v", len(ended), err)
		}
		switch f := f.(type) {
		case *http2.DataFrame:
			window -= int64(f.Length)
			if window < 0 {
				t.Fatalf("received %d bytes beyond the connection window granted", -window)
			}
			consumed += int64(f.Length)
			if window < 512 { // credit late, keeping the window nearly used up
				fr.WriteWindowUpdate(0, uint32(consumed))
				window, consumed = window+consumed, 0
			}
		case *http2.MetaHeadersFrame:
			if f.StreamEnded() {
				ended[f.StreamID] = f.PseudoValue("status") + " grpc-status " + headerValue(f, "grpc-status")
			}
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				fr.WritePing(true, f.Data)
			}
		case *http2.RSTStreamFrame:
			t.Fatalf("stream %d reset: %v", f.StreamID, f.ErrCode)
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v", f.ErrCode)
		}
	}
	for sid, st := range ended {
		if !strings.HasSuffix(st, "grpc-status 0") {
			t.Errorf("stream %d ended with %s", sid, st)
		}
	}
}

func headerValue(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.Fields {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

// Calls the shim answers itself prompt pings from grpc-go clients (BDP
// estimation) while the backend connection carries nothing: passed on, they
// would count against the backend's ping policy and end the connection
// with ENHANCE_YOUR_CALM "too_many_pings".
func TestRelayPingsStayHere(t *testing.T) {
	r := newRig(t, false)
	rt := runtimeapi.NewRuntimeServiceClient(r.shim)
	for i := 0; i < 50; i++ {
		if _, err := rt.StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: "c"}); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
	}
	if _, err := rt.Version(context.Background(), &runtimeapi.VersionRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := r.dials.Load(); n != 1 {
		t.Errorf("the client connected %d times, want once (the backend ended the connection)", n)
	}
}

// A backend GOAWAY speaks for the backend's streams only. A call the shim is
// answering itself (its stream never reached the backend connection) must
// still be answered there, not be taken by the client as unprocessed and
// retried elsewhere, which would run the hook twice (a second
// CreateContainer). The backend connection here is a raw HTTP/2 server that
// sends GOAWAY with last stream id 0 while the hook is in the backend.
func TestRelayBackendGoAwayKeepsOwnStreams(t *testing.T) {
	r := newRig(t, false)
	gate, in := make(chan struct{}), make(chan struct{}, 1)
	r.backend.mu.Lock()
	r.backend.startGate, r.backend.startIn = gate, in
	r.backend.mu.Unlock()

	shimSide, fake := net.Pipe()
	defer fake.Close()
	goAway := make(chan struct{})
	go func() { // the raw backend
		fr := http2.NewFramer(fake, fake)
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(fake, preface); err != nil {
			return
		}
		var mu sync.Mutex
		write := func(f func() error) { mu.Lock(); f(); mu.Unlock() }
		write(func() error { return fr.WriteSettings() })
		go func() {
			<-goAway
			write(func() error { return fr.WriteGoAway(0, http2.ErrCodeNo, nil) })
		}()
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if sf, ok := f.(*http2.SettingsFrame); ok && !sf.IsAck() {
				write(func() error { return fr.WriteSettingsAck() })
			}
		}
	}()
	dial := func() (net.Conn, error) { return shimSide, nil }
	r.nextDial.Store(&dial)

	conn := dialMem(t, r.shimLis)
	done := make(chan error, 1)
	go func() {
		_, err := runtimeapi.NewRuntimeServiceClient(conn).StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: "c1"})
		done <- err
	}()
	select {
	case <-in:
	case <-time.After(10 * time.Second):
		t.Fatal("StartContainer never reached the backend")
	}
	close(goAway)
	time.Sleep(100 * time.Millisecond) // the GOAWAY reaches the client
	close(gate)
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("StartContainer = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("StartContainer never answered")
	}
	r.backend.mu.Lock()
	started := append([]string(nil), r.backend.started...)
	r.backend.mu.Unlock()
	if len(started) != 1 {
		t.Errorf("backend started %v, want c1 once", started)
	}
}

// Header blocks larger than a frame go as HEADERS and CONTINUATION frames
// both ways (the relay encodes them again on each side).
func TestRelayLargeHeaderBlocks(t *testing.T) {
	r := newRig(t, false)
	big := strings.Repeat("m", 100<<10)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-big", big)
	if _, err := runtimeapi.NewRuntimeServiceClient(r.shim).Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Fatal(err)
	}
	r.backend.mu.Lock()
	got := r.backend.lastMD.Get("x-big")
	r.backend.mu.Unlock()
	if len(got) != 1 || got[0] != big {
		t.Errorf("the backend got x-big of %d values, want one of %d bytes", len(got), len(big))
	}
	// and back: the backend's status message, large, on a relayed call
	_, err := runtimeapi.NewRuntimeServiceClient(r.shim).ContainerStatus(context.Background(), &runtimeapi.ContainerStatusRequest{ContainerId: strings.Repeat("c", 60<<10)})
	if st := status.Convert(err); st.Code() != codes.NotFound || len(st.Message()) < 60<<10 || len(st.Details()) != 1 {
		t.Errorf("ContainerStatus = %v (message %d bytes, %d details), want NotFound with the long message and its detail", st.Code(), len(st.Message()), len(st.Details()))
	}
}

// A stream the relay rejects before the backend saw it (here: an invalid
// header field name) is reset towards the client, and its DATA, already on
// the way, must not reach the backend: DATA on a stream the backend never
// saw is a connection error there, which would end every call on it.
func TestRelayRejectedStreamDataDropped(t *testing.T) {
	r := newRig(t, false)
	// tap what the relay writes to the backend (grpc-go's server ignores
	// DATA on unknown streams; a strict server would not)
	var tapMu sync.Mutex
	dataOn := map[uint32]bool{}
	dial := func() (net.Conn, error) {
		b, err := r.backendLis.DialContext(context.Background())
		if err != nil {
			return nil, err
		}
		pr, pw := io.Pipe()
		go func() {
			io.ReadFull(pr, make([]byte, len(http2.ClientPreface)))
			fr := http2.NewFramer(nil, pr)
			for {
				f, err := fr.ReadFrame()
				if err != nil {
					io.Copy(io.Discard, pr)
					return
				}
				if f.Header().Type == http2.FrameData {
					tapMu.Lock()
					dataOn[f.Header().StreamID] = true
					tapMu.Unlock()
				}
			}
		}()
		return &tapConn{Conn: b, tap: pw}, nil
	}
	r.nextDial.Store(&dial)
	defer func() {
		tapMu.Lock()
		defer tapMu.Unlock()
		if dataOn[1] {
			t.Error("the backend got DATA on stream 1, which it never saw open")
		}
		if !dataOn[3] {
			t.Error("the tap saw no DATA on stream 3: it does not see the backend connection")
		}
	}()
	c := dialRaw(t, r.shimLis)
	fr := c.fr
	const version = "/runtime.v1.RuntimeService/Version"
	c.call(1, version, &runtimeapi.VersionRequest{}, hpack.HeaderField{Name: "X-Upper", Value: "v"}) // uppercase: not a valid HTTP/2 field name
	c.call(3, version, &runtimeapi.VersionRequest{})
	var reset1 bool
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("connection ended: %v", err)
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			if f.StreamID != 1 {
				t.Fatalf("stream %d reset: %v", f.StreamID, f.ErrCode)
			}
			reset1 = true
		case *http2.GoAwayFrame:
			t.Fatalf("GOAWAY %v %q", f.ErrCode, f.DebugData())
		case *http2.SettingsFrame:
			if !f.IsAck() {
				fr.WriteSettingsAck()
			}
		case *http2.MetaHeadersFrame:
			if f.StreamID == 3 && f.StreamEnded() {
				if got := headerValue(f, "grpc-status"); got != "0" || !reset1 {
					t.Fatalf("stream 3 ended with grpc-status %q; stream 1 reset: %v", got, reset1)
				}
				return
			}
		}
	}
}

// tapConn copies what is written to it to tap.
type tapConn struct {
	net.Conn
	tap *io.PipeWriter
}

func (c *tapConn) Write(b []byte) (int, error) {
	c.tap.Write(b)
	return c.Conn.Write(b)
}

func (c *tapConn) Close() error {
	c.tap.Close()
	return c.Conn.Close()
}

// rawClient is an HTTP/2 client written by hand, for what grpc-go clients
// neither do nor check.
type rawClient struct {
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
}

func dialRaw(t *testing.T, lis *bufconn.Listener) *rawClient {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	conn, err := lis.DialContext(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	c := &rawClient{fr: http2.NewFramer(conn, conn)}
	c.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	c.enc = hpack.NewEncoder(&c.hbuf)
	if _, err := conn.Write([]byte(http2.ClientPreface)); err != nil {
		t.Fatal(err)
	}
	c.fr.WriteSettings()
	return c
}

// call opens stream sid for a unary call of method with request m and the
// extra header fields, and ends its side of the stream.
func (c *rawClient) call(sid uint32, method string, m proto.Message, extra ...hpack.HeaderField) {
	c.hbuf.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", method}, {":authority", "mem"},
		{"content-type", "application/grpc"}, {"te", "trailers"}} {
		c.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	for _, f := range extra {
		c.enc.WriteField(f)
	}
	c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: c.hbuf.Bytes(), EndHeaders: true})
	b, _ := proto.Marshal(m)
	c.fr.WriteData(sid, true, append([]byte{0, byte(len(b) >> 24), byte(len(b) >> 16), byte(len(b) >> 8), byte(len(b))}, b...))
}

// addLargeContainers gives the backend n containers of about 230 bytes each
// in a ListContainers answer.
func (r *rig) addLargeContainers(n int) {
	label := strings.Repeat("x", 200)
	for i := 0; i < n; i++ {
		r.backend.containers = append(r.backend.containers, &runtimeapi.Container{
			Id: fmt.Sprintf("c%04d", i), PodSandboxId: "other", Labels: map[string]string{"l": label}})
	}
}
