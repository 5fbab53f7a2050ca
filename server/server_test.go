package server

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/containerd/nri/pkg/adaptation"
	"github.com/containerd/nri/pkg/api"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	criclient "k8s.io/cri-client/pkg"

	"github.com/cri-nstarget/cri-nstarget/intents"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// fakeBackend is a CRI runtime that records what it receives. It stands in
// for containerd only in unit tests.
type fakeBackend struct {
	runtimeapi.UnimplementedRuntimeServiceServer
	runtimeapi.UnimplementedImageServiceServer

	mu         sync.Mutex
	containers []*runtimeapi.Container
	created    []*runtimeapi.CreateContainerRequest
	createdRaw [][]byte // each CreateContainerRequest as it came on the wire
	started    []string
	removed    []string
	lastMD     metadata.MD
	calls      map[string]int // calls received, by method name
	onCreate   func()         // when set, CreateContainer calls it before answering
	// nri, when set, is containerd's NRI CreateContainer event: called with
	// the id the container will have; an error fails the create, which
	// makes nothing
	nri        func(id string, req *runtimeapi.CreateContainerRequest) error
	removeErr  error // when set, RemoveContainer fails with it
	eventsOpen bool  // GetContainerEvents stays open after its events, as containerd's does
	lastDL     time.Time
	nextID     int
	startGate  chan struct{} // when set, StartContainer waits for it to close...
	startIn    chan struct{} // ...after telling this one it is in
	// onRemovePod, when set, is called by RemovePodSandbox before it removes
	onRemovePod func()
}

// recordingCodec is the fake backend's codec: it keeps each
// CreateContainerRequest's bytes, and decodes what a cri-api Go type
// cannot hold (strings that are not UTF-8) as containerd 1.6 (gogo) does,
// leniently.
type recordingCodec struct{ b *fakeBackend }

func (recordingCodec) Name() string                           { return "proto" }
func (recordingCodec) Marshal(v any) (mem.BufferSlice, error) { return lenientCodec{}.Marshal(v) }
func (c recordingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if _, ok := v.(*runtimeapi.CreateContainerRequest); ok {
		c.b.mu.Lock()
		c.b.createdRaw = append(c.b.createdRaw, data.Materialize())
		c.b.mu.Unlock()
	}
	return lenientCodec{}.Unmarshal(data, v)
}

// count records one call of method.
func (b *fakeBackend) count(method string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.calls == nil {
		b.calls = map[string]int{}
	}
	b.calls[method]++
}

// backendCalls is how many calls of method the backend received.
func (r *rig) backendCalls(method string) int {
	r.backend.mu.Lock()
	defer r.backend.mu.Unlock()
	return r.backend.calls[method]
}

func (b *fakeBackend) record(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lastMD, _ = metadata.FromIncomingContext(ctx)
	b.lastDL, _ = ctx.Deadline()
}

func (b *fakeBackend) Version(ctx context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
	b.count("Version")
	b.record(ctx)
	grpc.SetHeader(ctx, metadata.Pairs("x-backend-header", "h"))
	grpc.SetTrailer(ctx, metadata.Pairs("x-backend-trailer", "t"))
	return &runtimeapi.VersionResponse{Version: "0.1.0", RuntimeName: "fake", RuntimeVersion: "1", RuntimeApiVersion: "v1"}, nil
}

func (b *fakeBackend) ContainerStatus(ctx context.Context, req *runtimeapi.ContainerStatusRequest) (*runtimeapi.ContainerStatusResponse, error) {
	b.record(ctx)
	st, _ := status.New(codes.NotFound, "no such container "+req.GetContainerId()).
		WithDetails(&runtimeapi.ContainerStatusRequest{ContainerId: "detail"})
	return nil, st.Err()
}

func (b *fakeBackend) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	b.count("ListContainers")
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*runtimeapi.Container
	for _, c := range b.containers {
		// as containerd: the id filter takes a unique prefix
		f := req.GetFilter()
		if (f.GetId() == "" || strings.HasPrefix(c.GetId(), f.GetId())) && (f.GetPodSandboxId() == "" || c.GetPodSandboxId() == f.GetPodSandboxId()) {
			out = append(out, c)
		}
	}
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

// ListPodSandbox answers with the sandboxes its containers are in; the id
// filter takes a unique prefix, as containerd's does.
func (b *fakeBackend) ListPodSandbox(_ context.Context, req *runtimeapi.ListPodSandboxRequest) (*runtimeapi.ListPodSandboxResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	seen := map[string]bool{}
	var out []*runtimeapi.PodSandbox
	for _, c := range b.containers {
		id := c.GetPodSandboxId()
		if !seen[id] && strings.HasPrefix(id, req.GetFilter().GetId()) {
			seen[id] = true
			out = append(out, &runtimeapi.PodSandbox{Id: id})
		}
	}
	if len(out) > 1 && req.GetFilter().GetId() != "" {
		out = nil // ambiguous: containerd answers none
	}
	return &runtimeapi.ListPodSandboxResponse{Items: out}, nil
}

func (b *fakeBackend) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	id := "new" + string(rune('0'+b.nextID+1))
	if f := b.nri; f != nil {
		// containerd's NRI event, inside its CreateContainer
		b.mu.Unlock()
		err := f(id, req)
		b.mu.Lock()
		if err != nil {
			return nil, err
		}
	}
	b.nextID++
	b.created = append(b.created, req)
	b.containers = append(b.containers, &runtimeapi.Container{Id: id, PodSandboxId: req.GetPodSandboxId(),
		Metadata: req.GetConfig().GetMetadata(), State: runtimeapi.ContainerState_CONTAINER_CREATED})
	if f := b.onCreate; f != nil {
		b.mu.Unlock()
		f()
		b.mu.Lock()
	}
	return &runtimeapi.CreateContainerResponse{ContainerId: id}, nil
}

func (b *fakeBackend) StartContainer(_ context.Context, req *runtimeapi.StartContainerRequest) (*runtimeapi.StartContainerResponse, error) {
	b.mu.Lock()
	gate, in := b.startGate, b.startIn
	b.mu.Unlock()
	if gate != nil {
		in <- struct{}{}
		<-gate
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.started = append(b.started, req.GetContainerId())
	return &runtimeapi.StartContainerResponse{}, nil
}

func (b *fakeBackend) RemoveContainer(_ context.Context, req *runtimeapi.RemoveContainerRequest) (*runtimeapi.RemoveContainerResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.removeErr != nil {
		return nil, b.removeErr
	}
	b.removed = append(b.removed, req.GetContainerId())
	for i, c := range b.containers {
		if c.GetId() == req.GetContainerId() {
			b.containers = append(b.containers[:i], b.containers[i+1:]...)
			return &runtimeapi.RemoveContainerResponse{}, nil
		}
	}
	return &runtimeapi.RemoveContainerResponse{}, nil
}

func (b *fakeBackend) RemovePodSandbox(_ context.Context, req *runtimeapi.RemovePodSandboxRequest) (*runtimeapi.RemovePodSandboxResponse, error) {
	if b.onRemovePod != nil {
		b.onRemovePod()
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	kept := b.containers[:0]
	for _, c := range b.containers {
		if c.GetPodSandboxId() != req.GetPodSandboxId() {
			kept = append(kept, c)
		}
	}
	b.containers = kept
	return &runtimeapi.RemovePodSandboxResponse{}, nil
}

func (b *fakeBackend) GetContainerEvents(_ *runtimeapi.GetEventsRequest, ss runtimeapi.RuntimeService_GetContainerEventsServer) error {
	for i := 0; i < 3; i++ {
		if err := ss.Send(&runtimeapi.ContainerEventResponse{ContainerId: "c", CreatedAt: int64(i)}); err != nil {
			return err
		}
	}
	b.mu.Lock()
	open := b.eventsOpen
	b.mu.Unlock()
	if open {
		<-ss.Context().Done()
		return ss.Context().Err()
	}
	return status.Error(codes.Aborted, "events end")
}

func (b *fakeBackend) ListImages(context.Context, *runtimeapi.ListImagesRequest) (*runtimeapi.ListImagesResponse, error) {
	return &runtimeapi.ListImagesResponse{Images: []*runtimeapi.Image{{Id: "sha256:1", RepoTags: []string{"busybox:1"}}}}, nil
}

// futureRPC serves a method this build's cri-api does not have, as a newer
// backend would: the proxy must forward it all the same.
func futureRPC(_ any, ss grpc.ServerStream) error {
	if m, _ := grpc.MethodFromServerStream(ss); m != "/runtime.v1.RuntimeService/FutureRPC" {
		return status.Errorf(codes.Unimplemented, "unknown method %s", m)
	}
	in := new(runtimeapi.VersionRequest)
	if err := ss.RecvMsg(in); err != nil {
		return err
	}
	return ss.SendMsg(&runtimeapi.VersionResponse{Version: "future:" + in.GetVersion()})
}

// fakes for the containerd API and the pins.
type fakeTasks struct {
	pid uint32
	err error
}

func (f *fakeTasks) TaskPID(context.Context, string) (uint32, error) { return f.pid, f.err }

type fakeSpecs struct {
	mu     sync.Mutex
	specs  map[string]*specs.Spec
	err    error
	onEdit func() // when set, EditSpec calls it first
	shmDir string // the pod's /dev/shm; default a path that does not exist
	userns string // the pod's user namespace; default none (the host's)
	edits  int    // EditSpec calls
}

// made is the spec containerd makes for a container of the pod with pid
// and ipc POD.
func (f *fakeSpecs) made() *specs.Spec {
	s := &specs.Spec{Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{
		{Type: specs.PIDNamespace, Path: "/proc/42/ns/pid"}, {Type: specs.IPCNamespace, Path: "/proc/42/ns/ipc"}}},
		Mounts:      []specs.Mount{{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue"}, f.podShm()},
		Annotations: map[string]string{criNameAnnotation: "debugger"}}
	if f.userns != "" {
		s.Linux.Namespaces = append(s.Linux.Namespaces, specs.LinuxNamespace{Type: specs.UserNamespace, Path: f.userns})
	}
	return s
}

// podShm is the /dev/shm mount containerd gives a container of the pod.
func (f *fakeSpecs) podShm() specs.Mount {
	src := f.shmDir
	if src == "" {
		src = "/nonexistent/sandboxes/sb1/shm"
	}
	return specs.Mount{Destination: "/dev/shm", Type: "bind", Source: src, Options: []string{"rbind", "rprivate", "rw"}}
}

// Spec is the spec EditSpec would edit, as it is now.
func (f *fakeSpecs) Spec(ctx context.Context, id string) (*specs.Spec, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	s, ok := f.specs[id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "container %q", id)
	}
	c := *s
	return &c, nil
}

// EditSpec fails, as a containerd client would, when ctx is done.
func (f *fakeSpecs) EditSpec(ctx context.Context, id string, edit func(*specs.Spec) ([]oci.Opt, error)) error {
	if f.onEdit != nil {
		f.onEdit()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.edits++
	if f.err != nil {
		return f.err
	}
	s, ok := f.specs[id]
	if !ok {
		s = f.made()
		f.specs[id] = s
	}
	opts, err := edit(s)
	if err != nil {
		return err
	}
	return oci.Apply(s, opts...)
}

type fakePins struct {
	mu         sync.Mutex
	held       map[string]map[namespaces.Kind]string
	err        error
	holdErr    error            // Hold fails (Add does not)
	releaseErr map[string]error // Release of these ids fails
}

func (f *fakePins) Paths(id string, hs []*namespaces.Handle) (map[namespaces.Kind]string, error) {
	paths := map[namespaces.Kind]string{}
	for _, h := range hs {
		paths[h.Kind] = "/pins/" + id + "/" + string(h.Kind)
	}
	return paths, nil
}

func (f *fakePins) Hold(id string, hs []*namespaces.Handle) error {
	paths, _ := f.Paths(id, hs)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	if f.holdErr != nil {
		return f.holdErr
	}
	if f.held[id] == nil {
		f.held[id] = map[namespaces.Kind]string{}
	}
	for k, p := range paths {
		f.held[id][k] = p
	}
	return nil
}

func (f *fakePins) Add(id string, h *namespaces.Handle) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return "", f.err
	}
	if f.held[id] == nil {
		f.held[id] = map[namespaces.Kind]string{}
	}
	path := "/pins/" + id + "/" + string(h.Kind)
	f.held[id][h.Kind] = path
	return path, nil
}

// pinned tells whether id has pins.
func (r *rig) pinned(id string) bool {
	r.pins.mu.Lock()
	defer r.pins.mu.Unlock()
	return len(r.pins.held[id]) > 0
}

func (f *fakePins) Path(id string, kind namespaces.Kind) (string, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.held[id][kind]
	return p, ok
}

func (f *fakePins) Release(id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.releaseErr[id]; err != nil {
		return err
	}
	delete(f.held, id)
	return nil
}

func (f *fakePins) IDs() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id := range f.held {
		ids = append(ids, id)
	}
	return ids, nil
}

// rig is a shim in front of a fake backend, both served by real
// grpc.Servers on in-memory listeners: every test of an intercepted method
// goes through the shim's grpc.Server as kubelet's calls do.
type rig struct {
	backend    *fakeBackend
	direct     *grpc.ClientConn // to the backend
	shim       *grpc.ClientConn // through the shim
	shimLis    *bufconn.Listener
	backendLis *bufconn.Listener
	server     *Server
	tasks      *fakeTasks
	specs      *fakeSpecs
	pins       *fakePins
	opened     [][]namespaces.Kind
	live       bool // what hasInit answers

	// the NRI path (newNRIRig): NRI's runtime, its socket, the adjustments
	// it returned by container id, and an error that fails the create after
	// the event (as a runc failure would)
	nri       *adaptation.Adaptation
	nriSocket string
	adjusted  map[string]*api.ContainerAdjustment
	nriFail   error
}

func newRig(t testing.TB, strict bool) *rig {
	t.Helper()
	return newRigWith(t, strict)
}

// newRigWith is newRig with options for the shim's grpc.Server.
func newRigWith(t testing.TB, strict bool, grpcOpts ...grpc.ServerOption) *rig {
	t.Helper()
	r := &rig{
		backend: &fakeBackend{},
		tasks:   &fakeTasks{pid: 4242},
		specs:   &fakeSpecs{specs: map[string]*specs.Spec{}},
		pins:    &fakePins{held: map[string]map[namespaces.Kind]string{}},
		live:    true,
	}
	bs := grpc.NewServer(grpc.UnknownServiceHandler(futureRPC), grpc.MaxRecvMsgSize(MaxMsgSize), grpc.MaxSendMsgSize(MaxMsgSize),
		grpc.ForceServerCodecV2(recordingCodec{r.backend}))
	runtimeapi.RegisterRuntimeServiceServer(bs, r.backend)
	runtimeapi.RegisterImageServiceServer(bs, r.backend)
	r.backendLis = bufconn.Listen(1 << 20)
	go bs.Serve(r.backendLis)
	t.Cleanup(bs.Stop)
	// as cmd/cri-nstarget dials containerd's CRI
	r.direct = dialMem(t, r.backendLis, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(MaxMsgSize), grpc.MaxCallSendMsgSize(MaxMsgSize)))

	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	r.server = newServer(r.direct, runtimeapi.NewRuntimeServiceClient(r.direct), r.tasks, r.specs, r.pins, intents.New(t.TempDir()), strict, logrus.NewEntry(log), nil, grpcOpts...)
	r.server.target.openNS = func(pid int, kinds []namespaces.Kind) ([]*namespaces.Handle, error) {
		r.opened = append(r.opened, kinds)
		hs := make([]*namespaces.Handle, len(kinds))
		for i, k := range kinds {
			hs[i] = &namespaces.Handle{Kind: k, ID: namespaces.ID{Dev: 4, Ino: 4026530000 + uint64(i)}}
		}
		return hs, nil
	}
	r.server.target.hasInit = func(string) (bool, error) { return r.live, nil }
	r.server.target.canJoin = func(*namespaces.Handle, string) (bool, error) { return true, nil }
	r.shimLis = bufconn.Listen(1 << 20)
	go r.server.Serve(r.shimLis)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.server.Shutdown(ctx)
	})
	r.shim = dialMem(t, r.shimLis)
	return r
}

// setMetrics makes m the shim's metrics recorder, for calls and targeting.
func (r *rig) setMetrics(m Metrics) {
	r.server.metrics = m
	r.server.target.report.metrics = m
}

func dialMem(t testing.TB, lis *bufconn.Listener, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///mem", append([]grpc.DialOption{
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

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

// addContainers gives the fake backend n containers with long labels, so
// that ListContainers answers with about n KiB.
func (r *rig) addContainers(n int) {
	r.backend.mu.Lock()
	defer r.backend.mu.Unlock()
	label := strings.Repeat("x", 1000)
	for i := 0; i < n; i++ {
		r.backend.containers = append(r.backend.containers, &runtimeapi.Container{
			Id: fmt.Sprintf("%064d", i), PodSandboxId: "p", Labels: map[string]string{"l": label}})
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
	ctx, cancel := context.WithTimeout(context.Background(), grace)
	defer cancel()
	start := time.Now()
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

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
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
