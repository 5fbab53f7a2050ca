package server

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

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
	started    []string
	removed    []string
	lastMD     metadata.MD
	lastDL     time.Time
	nextID     int
	startGate  chan struct{} // when set, StartContainer waits for it to close...
	startIn    chan struct{} // ...after telling this one it is in
}

func (b *fakeBackend) record(ctx context.Context) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lastMD, _ = metadata.FromIncomingContext(ctx)
	b.lastDL, _ = ctx.Deadline()
}

func (b *fakeBackend) Version(ctx context.Context, _ *runtimeapi.VersionRequest) (*runtimeapi.VersionResponse, error) {
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
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []*runtimeapi.Container
	for _, c := range b.containers {
		if id := req.GetFilter().GetId(); id == "" || c.GetId() == id {
			out = append(out, c)
		}
	}
	return &runtimeapi.ListContainersResponse{Containers: out}, nil
}

func (b *fakeBackend) CreateContainer(ctx context.Context, req *runtimeapi.CreateContainerRequest) (*runtimeapi.CreateContainerResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.nextID++
	id := "new" + string(rune('0'+b.nextID))
	b.created = append(b.created, req)
	b.containers = append(b.containers, &runtimeapi.Container{Id: id, PodSandboxId: req.GetPodSandboxId(), State: runtimeapi.ContainerState_CONTAINER_CREATED})
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
	mu    sync.Mutex
	specs map[string]*specs.Spec
	err   error
}

func (f *fakeSpecs) EditSpec(_ context.Context, id string, edit func(*specs.Spec) ([]oci.Opt, error)) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return f.err
	}
	s, ok := f.specs[id]
	if !ok {
		// what containerd makes for pid/ipc POD
		s = &specs.Spec{Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{
			{Type: specs.PIDNamespace, Path: "/proc/42/ns/pid"}, {Type: specs.IPCNamespace, Path: "/proc/42/ns/ipc"}}}}
		f.specs[id] = s
	}
	opts, err := edit(s)
	if err != nil {
		return err
	}
	return oci.Apply(s, opts...)
}

type fakePins struct {
	mu   sync.Mutex
	held map[string]map[namespaces.Kind]string
	err  error
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
	f.held[id] = paths
	return nil
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

// rig is a shim in front of a fake backend, both on in-memory listeners.
type rig struct {
	backend     *fakeBackend
	direct      *grpc.ClientConn // to the backend
	shim        *grpc.ClientConn // through the shim: relayed (Serve with a dialer)
	shimGRPC    *grpc.ClientConn // through the shim's grpc.Server (the fallback path)
	shimLis     *bufconn.Listener
	backendLis  *bufconn.Listener
	dials       atomic.Int32                             // backend connections the relay opened
	backendDown atomic.Bool                              // the relay's dial fails
	nextDial    atomic.Pointer[func() (net.Conn, error)] // once: the relay's next backend connection
	server      *Server
	tasks       *fakeTasks
	specs       *fakeSpecs
	pins        *fakePins
	opened      [][]namespaces.Kind
	live        bool // what hasInit answers
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
	bs := grpc.NewServer(grpc.UnknownServiceHandler(futureRPC))
	runtimeapi.RegisterRuntimeServiceServer(bs, r.backend)
	runtimeapi.RegisterImageServiceServer(bs, r.backend)
	backendLis := bufconn.Listen(1 << 20)
	r.backendLis = backendLis
	go bs.Serve(backendLis)
	t.Cleanup(bs.Stop)
	r.direct = dialMem(t, backendLis)

	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	r.server = newServer(r.direct, runtimeapi.NewRuntimeServiceClient(r.direct), r.tasks, r.specs, r.pins, strict, logrus.NewEntry(log), grpcOpts...)
	r.server.openNS = func(pid int, kinds []namespaces.Kind, verify func() error) ([]*namespaces.Handle, error) {
		r.opened = append(r.opened, kinds)
		if verify != nil {
			if err := verify(); err != nil {
				return nil, err
			}
		}
		hs := make([]*namespaces.Handle, len(kinds))
		for i, k := range kinds {
			hs[i] = &namespaces.Handle{Kind: k, ID: namespaces.ID{Dev: 4, Ino: 4026530000 + uint64(i)}}
		}
		return hs, nil
	}
	r.server.hasInit = func(string) (bool, error) { return r.live, nil }
	r.server.conns.dial = func(ctx context.Context) (net.Conn, error) {
		r.dials.Add(1)
		if r.backendDown.Load() {
			return nil, errors.New("backend down")
		}
		if d := r.nextDial.Swap(nil); d != nil {
			return (*d)()
		}
		return backendLis.DialContext(ctx)
	}
	shimLis, grpcLis := bufconn.Listen(1<<20), bufconn.Listen(1<<20)
	r.shimLis = shimLis
	go r.server.Serve(shimLis)
	go r.server.grpc.Serve(grpcLis)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		r.server.Shutdown(ctx)
	})
	r.shim = dialMem(t, shimLis)
	r.shimGRPC = dialMem(t, grpcLis)
	return r
}

func dialMem(t testing.TB, lis *bufconn.Listener) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient("passthrough:///mem",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
