package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criclient "k8s.io/cri-client/pkg"
)

// rawClient speaks HTTP/2 frames to the shim, for what a grpc client never
// does: stop reading, or look at the server's SETTINGS.
type rawClient struct {
	net.Conn
	fr  *http2.Framer
	enc *hpack.Encoder
	buf bytes.Buffer
}

// dialRaw connects to lis and sends the client preface and settings.
func dialRaw(t *testing.T, lis *bufconn.Listener, settings ...http2.Setting) *rawClient {
	t.Helper()
	conn, err := lis.Dial()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	c := &rawClient{Conn: conn, fr: http2.NewFramer(conn, conn)}
	c.enc = hpack.NewEncoder(&c.buf)
	if _, err := io.WriteString(conn, http2.ClientPreface); err != nil {
		t.Fatal(err)
	}
	if err := c.fr.WriteSettings(settings...); err != nil {
		t.Fatal(err)
	}
	return c
}

// call opens stream sid with one gRPC request for method and ends it.
func (c *rawClient) call(t *testing.T, sid uint32, method string, m proto.Message) {
	t.Helper()
	c.buf.Reset()
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: method}, {Name: ":authority", Value: "localhost"},
		{Name: "content-type", Value: "application/grpc"}, {Name: "te", Value: "trailers"}} {
		c.enc.WriteField(f)
	}
	if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: sid, BlockFragment: c.buf.Bytes(), EndHeaders: true}); err != nil {
		t.Fatal(err)
	}
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	msg := binary.BigEndian.AppendUint32([]byte{0}, uint32(len(b)))
	if err := c.fr.WriteData(sid, true, append(msg, b...)); err != nil {
		t.Fatal(err)
	}
}

// TestShutdownKeepsItsDeadline: a client that asked for a large answer and
// stopped reading holds its call in flight; Shutdown still returns at its
// deadline, and the call's connection is closed.
func TestShutdownKeepsItsDeadline(t *testing.T) {
	r := newRig(t, false)
	r.addContainers(3000) // ~3 MiB: more than the in-memory pipe and grpc's write quota hold
	// the largest windows HTTP/2 allows, so nothing but the client's not
	// reading holds the answer back
	c := dialRaw(t, r.shimLis, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1<<31 - 1})
	if err := c.fr.WriteWindowUpdate(0, 1<<31-1-65535); err != nil {
		t.Fatal(err)
	}
	c.call(t, 1, "/runtime.v1.RuntimeService/ListContainers", &runtimeapi.ListContainersRequest{})
	// the call is in flight once the backend answered it
	waitFor(t, "the ListContainers call to reach the backend", func() bool { return r.backendCalls("ListContainers") > 0 })
	time.Sleep(100 * time.Millisecond) // let the shim start writing the answer

	const grace = 300 * time.Millisecond
	start := time.Now() // before the deadline is set, so that a busy machine cannot measure less than it
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	done := make(chan struct{})
	go func() { r.server.Shutdown(ctx); close(done) }()
	select {
	case <-done:
	case <-time.After(grace + 3*time.Second):
		t.Fatalf("Shutdown with a %v deadline has not returned after %v", grace, time.Since(start))
	}
	if d := time.Since(start); d < grace {
		t.Errorf("Shutdown returned after %v, before its deadline: the call in flight was not waited for", d)
	}
	// the stalled client's connection is closed: reading drains what the
	// shim had written, then ends
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Errorf("reading the closed connection: %v, want EOF", err)
	}
}

// TestServerSettings: what the shim advertises to every client bounds what
// one can make it hold.
func TestServerSettings(t *testing.T) {
	r := newRig(t, false)
	c := dialRaw(t, r.shimLis)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := c.fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		t.Fatalf("first frame = %v, want SETTINGS", f)
	}
	for _, want := range []http2.Setting{
		{ID: http2.SettingMaxConcurrentStreams, Val: MaxConcurrentStreams},
		{ID: http2.SettingMaxHeaderListSize, Val: MaxHeaderListSize},
	} {
		if got, ok := sf.Value(want.ID); !ok || got != want.Val {
			t.Errorf("%v = %d (sent: %v), want %d", want.ID, got, ok, want.Val)
		}
	}
}

// TestPrefaceTimeout: a connection that never sends the HTTP/2 preface is
// closed after PrefaceTimeout.
func TestPrefaceTimeout(t *testing.T) {
	r := newRig(t, false)
	conn, err := r.shimLis.Dial()
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	start := time.Now()
	conn.SetReadDeadline(start.Add(PrefaceTimeout + 5*time.Second))
	_, err = io.Copy(io.Discard, conn)
	if d := time.Since(start); err != nil || d < PrefaceTimeout-time.Second {
		t.Errorf("silent connection ended after %v with %v, want closed (EOF) after about %v", d, err, PrefaceTimeout)
	}
}

// TestMessageBounds: a request over MaxMsgSize is refused by the shim
// (ResourceExhausted) and never reaches the backend; one just under passes.
func TestMessageBounds(t *testing.T) {
	r := newRig(t, false)
	big := func(n int) *runtimeapi.VersionRequest {
		return &runtimeapi.VersionRequest{Version: strings.Repeat("v", n)}
	}
	opt := grpc.MaxCallSendMsgSize(64 << 20)
	rt := runtimeapi.NewRuntimeServiceClient(r.shim)
	if _, err := rt.Version(context.Background(), big(MaxMsgSize+1), opt); status.Code(err) != codes.ResourceExhausted {
		t.Errorf("Version with %d bytes: %v, want ResourceExhausted", MaxMsgSize+1, err)
	}
	if n := r.backendCalls("Version"); n != 0 {
		t.Errorf("the backend saw %d Version calls, want 0", n)
	}
	if _, err := rt.Version(context.Background(), big(MaxMsgSize-64), opt); err != nil {
		t.Errorf("Version just under %d bytes: %v", MaxMsgSize, err)
	}
}

// TestHeaderListBound: metadata over MaxHeaderListSize is refused; what
// kubelet sends passes.
func TestHeaderListBound(t *testing.T) {
	r := newRig(t, false)
	rt := runtimeapi.NewRuntimeServiceClient(r.shim)
	ctx := metadata.AppendToOutgoingContext(context.Background(), "x-big", strings.Repeat("m", MaxHeaderListSize))
	if _, err := rt.Version(ctx, &runtimeapi.VersionRequest{}); err == nil {
		t.Error("Version with metadata over the header list bound succeeded")
	}
	if n := r.backendCalls("Version"); n != 0 {
		t.Errorf("the backend saw %d Version calls, want 0", n)
	}
	ctx = metadata.AppendToOutgoingContext(context.Background(), "x-small", strings.Repeat("m", 1000))
	if _, err := rt.Version(ctx, &runtimeapi.VersionRequest{}); err != nil {
		t.Errorf("Version with 1 KB of metadata: %v", err)
	}
}

// connCounter counts the connections a grpc.Server opens and closes.
type connCounter struct{ opened, closed atomic.Int32 }

func (c *connCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context   { return ctx }
func (c *connCounter) HandleRPC(context.Context, stats.RPCStats)                         {}
func (c *connCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (c *connCounter) HandleConn(_ context.Context, s stats.ConnStats) {
	switch s.(type) {
	case *stats.ConnBegin:
		c.opened.Add(1)
	case *stats.ConnEnd:
		c.closed.Add(1)
	}
}

// TestKubeletClientKeepsItsConnection runs kubelet's own CRI client
// (k8s.io/cri-client, with its dial settings) against the shim through
// bursts of calls with large answers (which make grpc send BDP pings) and
// idle gaps: it must keep one connection throughout, never sent away
// (GOAWAY) by the keepalive policy or a connection age.
func TestKubeletClientKeepsItsConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("takes several seconds")
	}
	if enforcement.MinTime > 10*time.Second || !enforcement.PermitWithoutStream {
		t.Fatalf("keepalive enforcement %+v refuses grpc-go clients' own keepalive (at most every 10 s, with or without calls)", enforcement)
	}
	conns := &connCounter{}
	r := newRigWith(t, false, grpc.StatsHandler(conns))
	r.addContainers(500) // ~0.5 MB answers
	dir, err := os.MkdirTemp("/tmp", "nst-ka-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	lis, err := net.Listen("unix", filepath.Join(dir, "cri.sock"))
	if err != nil {
		t.Fatal(err)
	}
	go r.server.Serve(lis)
	rt, err := criclient.NewRemoteRuntimeServiceBuilder().WithEndpoint("unix://" + filepath.Join(dir, "cri.sock")).
		WithConnectionTimeout(10 * time.Second).Build(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	calls := 0
	for burst := 0; burst < 4; burst++ {
		for i := 0; i < 10; i++ {
			cs, err := rt.ListContainers(ctx, &runtimeapi.ContainerFilter{})
			if err != nil || len(cs) != 500 {
				t.Fatalf("burst %d call %d: %d containers, %v", burst, i, len(cs), err)
			}
			if _, err := rt.Version(ctx, "v1"); err != nil {
				t.Fatalf("burst %d: Version: %v", burst, err)
			}
			calls += 2
		}
		time.Sleep(1500 * time.Millisecond)
	}
	if o, c := conns.opened.Load(), conns.closed.Load(); o != 1 || c != 0 {
		t.Errorf("after %d calls in 4 bursts: the shim opened %d connections and closed %d, want 1 kept open", calls, o, c)
	}
}

// TestShutdownEndsStreams: an events stream never ends by itself; shutdown
// ends it at once with Unavailable (its client subscribes again) instead of
// waiting out the deadline.
func TestShutdownEndsStreams(t *testing.T) {
	r := newRig(t, false)
	r.backend.eventsOpen = true
	st, err := runtimeapi.NewRuntimeServiceClient(r.shim).GetContainerEvents(context.Background(), &runtimeapi.GetEventsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := st.Recv(); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	start := time.Now()
	r.server.Shutdown(ctx)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Shutdown took %v with an events stream open, want it ended at once", d)
	}
	if _, err := st.Recv(); status.Code(err) != codes.Unavailable {
		t.Errorf("the stream ended with %v, want Unavailable", err)
	}
}
