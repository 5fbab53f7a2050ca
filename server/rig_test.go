package server

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	containers "github.com/containerd/containerd/api/services/containers/v1"
	tasks "github.com/containerd/containerd/api/services/tasks/v1"
	"github.com/containerd/containerd/api/types/task"
	"github.com/containerd/nri/pkg/adaptation"
	nriapi "github.com/containerd/nri/pkg/api"
	nrilog "github.com/containerd/nri/pkg/log"
	nrigen "github.com/containerd/nri/pkg/runtime-tools/generate"
	"github.com/containerd/nri/pkg/stub"
	validator "github.com/containerd/nri/plugins/default-validator"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	rgen "github.com/opencontainers/runtime-tools/generate"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/intents"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/nriplugin"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// This file is the unit tests' rig (rig, newRig, newNRIRig, eachPath),
// what tests do through it (create, start, record, ...), its fakes (of the
// backend's CRI, containerd's API, the pins, the metrics and the Events),
// NRI's runtime side as containerd runs it (nriRuntime, nriEvent,
// applyAdjustment), and the one wait helper (waitFor). The rig has no
// Metrics unless a test gives them (withMetrics): every other test runs the
// shim without them.

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
	// identity is what /proc says of the process a pid names, for
	// openIdentified (nil: a process in cgroup /kubepods/pod1/app, init of
	// its PID namespace)
	identity func(pid int) namespaces.Identity

	// the NRI path (newNRIRig): NRI's runtime, its socket, the adjustments
	// it returned by container id, and an error that fails the create after
	// the event (as a runc failure would)
	nri       *adaptation.Adaptation
	nriSocket string
	adjusted  map[string]*nriapi.ContainerAdjustment
	nriFail   error

	// kernel is the kernel's side the shim calls (through kernelOf), and
	// events where its Events go (nil: dropped): a test sets either before
	// the calls it makes, and the shim itself is never patched.
	kernel kernel
	events EventSink

	// deps are what the shim was built on (restart builds another on them)
	deps deps
}

// kernelOf is the kernel's side the rig's shim is built with: each call
// goes to r.kernel's function as the test has set it.
func (r *rig) kernelOf() kernel {
	return kernel{
		openNS: func(pid int, kinds []namespaces.Kind) ([]*namespaces.Handle, error) {
			return r.kernel.openNS(pid, kinds)
		},
		openIdentified: func(pid int, kinds []namespaces.Kind) ([]*namespaces.Handle, namespaces.Identity, error) {
			return r.kernel.openIdentified(pid, kinds)
		},
		hasInit: func(path string) (bool, error) { return r.kernel.hasInit(path) },
		canJoin: func(h *namespaces.Handle, userns string) (bool, error) { return r.kernel.canJoin(h, userns) },
		stat:    func(path string) (namespaces.ID, error) { return r.kernel.stat(path) },
		of: func(pid int, kinds []namespaces.Kind) (map[namespaces.Kind]namespaces.ID, error) {
			return r.kernel.of(pid, kinds)
		},
	}
}

// rigSink posts the shim's Events to the rig's events, as the test has
// set them.
type rigSink struct{ r *rig }

func (s rigSink) Post(e Event) {
	if s.r.events != nil {
		s.r.events.Post(e)
	}
}

// newRig is a rig on the Update path, its deps edited by edits (in order)
// before the server is built on them.
func newRig(t testing.TB, strict bool, edits ...func(*deps)) *rig {
	t.Helper()
	return buildRigEdit(t, strict, nil, false, editAll(edits))
}

// rigMaker makes a rig (newRig, or newNRIRig's with edits).
type rigMaker func(t testing.TB, strict bool, edits ...func(*deps)) *rig

// editAll is edits as one edit.
func editAll(edits []func(*deps)) func(*deps) {
	return func(d *deps) {
		for _, edit := range edits {
			edit(d)
		}
	}
}

// newRigWith is newRig with options for the shim's grpc.Server.
func newRigWith(t testing.TB, strict bool, grpcOpts ...grpc.ServerOption) *rig {
	t.Helper()
	return buildRig(t, strict, nil, grpcOpts...)
}

// buildRig is a rig whose shim is built, as New builds it, from one deps
// value: the fakes, the kernel's side faked, and nri (nil: the Update path).
func buildRig(t testing.TB, strict bool, nri *nriplugin.Plugin, grpcOpts ...grpc.ServerOption) *rig {
	t.Helper()
	return buildRigMode(t, strict, nri, false, grpcOpts...)
}

// buildRigMode is buildRig in the plugin mode when plugin (nri then
// watches every container, and no CRI is served).
func buildRigMode(t testing.TB, strict bool, nri *nriplugin.Plugin, plugin bool, grpcOpts ...grpc.ServerOption) *rig {
	t.Helper()
	return buildRigEdit(t, strict, nri, plugin, nil, grpcOpts...)
}

// buildRigEdit is buildRigMode's rig with its deps edited (edit, if not
// nil) before the server is built on them.
func buildRigEdit(t testing.TB, strict bool, nri *nriplugin.Plugin, plugin bool, edit func(*deps), grpcOpts ...grpc.ServerOption) *rig {
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
	k := hostKernel()
	k.openNS = func(pid int, kinds []namespaces.Kind) ([]*namespaces.Handle, error) {
		r.opened = append(r.opened, kinds)
		hs := make([]*namespaces.Handle, len(kinds))
		for i, k := range kinds {
			hs[i] = &namespaces.Handle{Kind: k, ID: namespaces.ID{Dev: 4, Ino: 4026530000 + uint64(i)}}
		}
		return hs, nil
	}
	k.openIdentified = func(pid int, kinds []namespaces.Kind) ([]*namespaces.Handle, namespaces.Identity, error) {
		hs, err := r.kernel.openNS(pid, kinds) // as a test set it
		if r.identity != nil {
			return hs, r.identity(pid), err
		}
		return hs, namespaces.Identity{Cgroups: []string{"/kubepods/pod1/app"}, NSpid: []int{pid, 1}}, err
	}
	k.hasInit = func(string) (bool, error) { return r.live, nil }
	k.canJoin = func(*namespaces.Handle, string) (bool, error) { return true, nil }
	r.kernel = k
	d := deps{
		backend:  r.direct,
		cri:      runtimeapi.NewRuntimeServiceClient(r.direct),
		tasks:    r.tasks,
		specs:    r.specs,
		pins:     r.pins,
		intents:  intents.New(t.TempDir()),
		kernel:   r.kernelOf(),
		sink:     rigSink{r},
		nri:      nri,
		plugin:   plugin,
		strict:   strict,
		log:      logrus.NewEntry(log),
		grpcOpts: grpcOpts,
	}
	if edit != nil {
		edit(&d)
	}
	r.deps = d
	r.serve(t)
	return r
}

// serve builds the rig's shim on its deps, runs it, and serves it (but in
// the plugin mode).
func (r *rig) serve(t testing.TB) {
	t.Helper()
	s := newServer(r.deps)
	r.server = s
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		s.Shutdown(ctx)
	})
	// as cmd/cri-nstarget runs it; a start-up reconcile that fails is the
	// reconciler loop's to retry, and the tests of it call Reconcile
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = s.Run(ctx)
	cancel()
	if r.deps.plugin {
		return
	}
	r.shimLis = bufconn.Listen(1 << 20)
	go s.Serve(r.shimLis)
	r.shim = dialMem(t, r.shimLis)
}

// restart is a restart of the shim on the Update path: the server shut
// down, and another built on the same deps (the same backend, containerd,
// pins and records), run and served in its place. What the first kept in
// memory is gone with it.
func (r *rig) restart(t testing.TB) {
	t.Helper()
	if r.deps.nri != nil {
		t.Fatal("restart: a rig on the NRI path cannot run its plugin twice")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r.server.Shutdown(ctx)
	r.serve(t)
}

// newNRIRig is a rig on the NRI path: NRI's runtime side as containerd 2.x
// runs it (the adaptation package), the shim's nriplugin.Plugin connected
// to it, and a fake backend whose CreateContainer sends the NRI event for
// the container it makes, with the spec containerd would make, and stores
// that spec with the adjustment applied, as containerd does.
func newNRIRig(t testing.TB, strict bool, opts ...adaptation.Option) *rig {
	t.Helper()
	return newNRIRigEdit(t, strict, nil, opts...)
}

// newNRIRigEdit is newNRIRig with its deps edited (edit, if not nil)
// before the server is built on them.
func newNRIRigEdit(t testing.TB, strict bool, edit func(*deps), opts ...adaptation.Option) *rig {
	t.Helper()
	a, socket := nriRuntime(t, opts...)
	log := logrus.New()
	log.SetLevel(logrus.PanicLevel)
	p := nriplugin.New(socket, logrus.NewEntry(log), nil)
	r := buildRigEdit(t, strict, p, false, edit) // which runs p until its Shutdown
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	// connected once an event reaches the plugin through the runtime
	probe := &nriapi.CreateContainerRequest{Pod: &nriapi.PodSandbox{Id: "probe"},
		Container: &nriapi.Container{Id: "probe", PodSandboxId: "probe", Name: "probe", Linux: &nriapi.LinuxContainer{}}}
	waitFor(t, "the plugin to connect to the NRI runtime", func() bool {
		token := nriplugin.NewToken()
		if !p.Expect(token, &nriplugin.Call{Sandbox: "probe", Name: "probe", Adjust: func(*nriapi.Container) (*nriapi.ContainerAdjustment, error) {
			return &nriapi.ContainerAdjustment{}, nil
		}}) {
			return false
		}
		probe.Container.Annotations = map[string]string{nriplugin.AnnotationRequest: token}
		a.CreateContainer(ctx, probe)
		answered, _ := p.Settle(ctx, token)
		return answered
	})
	r.nri, r.nriSocket = a, socket
	r.adjusted = map[string]*nriapi.ContainerAdjustment{}
	r.backend.nri = r.nriEvent
	return r
}

// eachPath runs a test of the create path on both paths a targeted create
// can take, as grpc-proxy runs one assertion set against a backend directly
// and through the proxy: the Update path (newRig), and the NRI path
// (newNRIRig), where the container is pointed inside the backend's create.
// Both leave the outcome in the fake containerd's stored spec, so the same
// assertions hold on both.
func eachPath(t *testing.T, test func(t *testing.T, newRig rigMaker)) {
	t.Run("update", func(t *testing.T) { test(t, newRig) })
	t.Run("nri", func(t *testing.T) {
		test(t, func(t testing.TB, strict bool, edits ...func(*deps)) *rig {
			return newNRIRigEdit(t, strict, editAll(edits))
		})
	})
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

// withMetrics is an edit of a rig's deps that makes m the shim's metrics
// recorder, for calls and targeting.
func withMetrics(m Metrics) func(*deps) {
	return func(d *deps) { d.metrics = m }
}

// waitFor waits, up to 10 s, for cond (tried every 5 ms), and fails t
// saying what it waited for.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func (r *rig) create(t *testing.T, req *runtimeapi.CreateContainerRequest) (string, error) {
	t.Helper()
	resp, err := runtimeapi.NewRuntimeServiceClient(r.shim).CreateContainer(context.Background(), req)
	return resp.GetContainerId(), err
}

func (r *rig) start(id string) error {
	_, err := runtimeapi.NewRuntimeServiceClient(r.shim).StartContainer(context.Background(), &runtimeapi.StartContainerRequest{ContainerId: id})
	return err
}

func createReq(sandbox string, ns *runtimeapi.NamespaceOption) *runtimeapi.CreateContainerRequest {
	return &runtimeapi.CreateContainerRequest{
		PodSandboxId: sandbox,
		Config: &runtimeapi.ContainerConfig{
			Metadata: &runtimeapi.ContainerMetadata{Name: "debugger"},
			Linux:    &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}},
		},
	}
}

// asRead is what criwire.ReadCreate reads of req once on the wire.
func asRead(req *runtimeapi.CreateContainerRequest) criwire.Create {
	c := criwire.Create{SandboxID: req.GetPodSandboxId(), Name: req.GetConfig().GetMetadata().GetName(), Attempt: req.GetConfig().GetMetadata().GetAttempt()}
	if ns := req.GetConfig().GetLinux().GetSecurityContext().GetNamespaceOptions(); ns != nil {
		c.Namespaces = &criwire.Namespaces{Network: ns.GetNetwork(), PID: ns.GetPid(), IPC: ns.GetIpc(), TargetID: ns.GetTargetId()}
	}
	return c
}

func pidTarget(id string) *runtimeapi.NamespaceOption {
	return &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: id}
}

func ipcTarget(id string) *runtimeapi.NamespaceOption {
	return &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_POD, Ipc: runtimeapi.NamespaceMode_TARGET, TargetId: id}
}

// withPod is req as the kubelet sends it: its sandbox_config names the pod.
func withPod(req *runtimeapi.CreateContainerRequest) *runtimeapi.CreateContainerRequest {
	req.SandboxConfig = &runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "web", Uid: "0d6c", Namespace: "shop"}}
	return req
}

var shop = &oci.Pod{Namespace: "shop", Name: "web", UID: "0d6c"}

// addTarget puts a container in the fake backend.
func (r *rig) addTarget(id, sandbox string, state runtimeapi.ContainerState) {
	r.backend.mu.Lock()
	defer r.backend.mu.Unlock()
	r.backend.containers = append(r.backend.containers, &runtimeapi.Container{Id: id, PodSandboxId: sandbox, State: state,
		Metadata: &runtimeapi.ContainerMetadata{Name: "app"}})
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

func (r *rig) record(t *testing.T, id string) oci.Record {
	t.Helper()
	r.specs.mu.Lock()
	defer r.specs.mu.Unlock()
	s, ok := r.specs.specs[id]
	if !ok {
		t.Fatalf("spec of %q never edited", id)
	}
	rec, ok, err := oci.ParseRecord(s.Annotations)
	if err != nil || !ok {
		t.Fatalf("record of %q: ok=%v err=%v", id, ok, err)
	}
	return rec
}

func (r *rig) nsPath(id string, typ specs.LinuxNamespaceType) string {
	r.specs.mu.Lock()
	defer r.specs.mu.Unlock()
	p, _ := oci.NamespacePath(r.specs.specs[id], typ)
	return p
}

func (r *rig) mount(id, dest string) (specs.Mount, bool) {
	r.specs.mu.Lock()
	defer r.specs.mu.Unlock()
	s := r.specs.specs[id]
	if i := oci.MountIndex(s, dest); i >= 0 {
		return s.Mounts[i], true
	}
	return specs.Mount{}, false
}

// pinned tells whether id has pins.
func (r *rig) pinned(id string) bool {
	r.pins.mu.Lock()
	defer r.pins.mu.Unlock()
	return len(r.pins.held[id]) > 0
}

func (r *rig) intents(t *testing.T) []intents.Record {
	t.Helper()
	l, err := r.server.target.recon.intents.List()
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (r *rig) createdCount() int {
	r.backend.mu.Lock()
	defer r.backend.mu.Unlock()
	return len(r.backend.created)
}

func (r *rig) backendContainers() int {
	r.backend.mu.Lock()
	defer r.backend.mu.Unlock()
	return len(r.backend.containers)
}

// backendCalls is how many calls of method the backend received.
func (r *rig) backendCalls(method string) int {
	r.backend.mu.Lock()
	defer r.backend.mu.Unlock()
	return r.backend.calls[method]
}

// errContainerdDown is what containerd's API answers while it is down.
var errContainerdDown = status.Error(codes.Unavailable, "connection error: containerd is down")

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
	listErr    error // when set, ListContainers fails with it
	eventsOpen bool  // GetContainerEvents stays open after its events, as containerd's does
	lastDL     time.Time
	nextID     int
	startGate  chan struct{} // when set, StartContainer waits for it to close...
	// onStart, when set, is called by StartContainer; an error fails the
	// start (as runc's failure to start the process would)
	onStart func(id string) error
	startIn chan struct{} // ...after telling this one it is in
	// onRemovePod, when set, is called by RemovePodSandbox before it removes
	onRemovePod func()
	// statuses answer ContainerStatus for these containers (the others:
	// NotFound); handlers are the pods' runtime handlers (RunPodSandbox,
	// ListPodSandbox, PodSandboxStatus); stopped the StopContainer calls;
	// config is what a verbose Status says of containerd's config.
	statuses map[string]*runtimeapi.ContainerStatus
	onStatus func(id string) // when set, ContainerStatus calls it after reading the status it answers
	handlers map[string]string
	stopped  []string
	config   string
}

// recordingCodec is the fake backend's codec: it keeps each
// CreateContainerRequest's bytes, and decodes what a cri-api Go type
// cannot hold (strings that are not UTF-8) as containerd 1.6 (gogo) does,
// leniently.
type recordingCodec struct{ b *fakeBackend }

func (recordingCodec) Name() string { return "proto" }

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
	b.mu.Lock()
	cs, ok := b.statuses[req.GetContainerId()]
	onStatus := b.onStatus
	b.mu.Unlock()
	if onStatus != nil {
		onStatus(req.GetContainerId())
	}
	if ok {
		return &runtimeapi.ContainerStatusResponse{Status: cs}, nil
	}
	st, _ := status.New(codes.NotFound, "no such container "+req.GetContainerId()).
		WithDetails(&runtimeapi.ContainerStatusRequest{ContainerId: "detail"})
	return nil, st.Err()
}

func (b *fakeBackend) ListContainers(ctx context.Context, req *runtimeapi.ListContainersRequest) (*runtimeapi.ListContainersResponse, error) {
	b.count("ListContainers")
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.listErr != nil {
		return nil, b.listErr
	}
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
			out = append(out, &runtimeapi.PodSandbox{Id: id, RuntimeHandler: b.handlers[id]})
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
	gate, in, onStart := b.startGate, b.startIn, b.onStart
	b.mu.Unlock()
	if gate != nil {
		in <- struct{}{}
		<-gate
	}
	if onStart != nil {
		if err := onStart(req.GetContainerId()); err != nil {
			return nil, err
		}
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

// RunPodSandbox makes a pod sandbox, whose id is its name.
func (b *fakeBackend) RunPodSandbox(_ context.Context, req *runtimeapi.RunPodSandboxRequest) (*runtimeapi.RunPodSandboxResponse, error) {
	b.count("RunPodSandbox")
	b.mu.Lock()
	defer b.mu.Unlock()
	id := req.GetConfig().GetMetadata().GetName()
	if b.handlers == nil {
		b.handlers = map[string]string{}
	}
	b.handlers[id] = req.GetRuntimeHandler()
	return &runtimeapi.RunPodSandboxResponse{PodSandboxId: id}, nil
}

func (b *fakeBackend) PodSandboxStatus(_ context.Context, req *runtimeapi.PodSandboxStatusRequest) (*runtimeapi.PodSandboxStatusResponse, error) {
	b.count("PodSandboxStatus")
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.handlers[req.GetPodSandboxId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "pod sandbox %q", req.GetPodSandboxId())
	}
	return &runtimeapi.PodSandboxStatusResponse{Status: &runtimeapi.PodSandboxStatus{Id: req.GetPodSandboxId(), RuntimeHandler: h}}, nil
}

func (b *fakeBackend) Status(_ context.Context, req *runtimeapi.StatusRequest) (*runtimeapi.StatusResponse, error) {
	b.count("Status")
	b.mu.Lock()
	defer b.mu.Unlock()
	resp := &runtimeapi.StatusResponse{Status: &runtimeapi.RuntimeStatus{}}
	if req.GetVerbose() && b.config != "" {
		resp.Info = map[string]string{"config": b.config}
	}
	return resp, nil
}

func (b *fakeBackend) StopContainer(_ context.Context, req *runtimeapi.StopContainerRequest) (*runtimeapi.StopContainerResponse, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stopped = append(b.stopped, req.GetContainerId())
	return &runtimeapi.StopContainerResponse{}, nil
}

// setStatus makes ContainerStatus of id answer st.
func (b *fakeBackend) setStatus(id string, st *runtimeapi.ContainerStatus) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.statuses == nil {
		b.statuses = map[string]*runtimeapi.ContainerStatus{}
	}
	st.Id = id
	b.statuses[id] = st
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
// fakeTasks is containerd's task service: every target runs with pid, or
// the lookup fails with err; answer, when set, answers instead (a pid that
// moves, one that waits).
type fakeTasks struct {
	pid    uint32
	err    error
	answer func() (uint32, error)
}

func (f *fakeTasks) TaskPID(context.Context, string) (uint32, error) {
	if f.answer != nil {
		return f.answer()
	}
	return f.pid, f.err
}

type fakeSpecs struct {
	mu     sync.Mutex
	specs  map[string]*specs.Spec
	err    error
	onEdit func() // when set, EditSpec calls it first
	shmDir string // the pod's /dev/shm; default a path that does not exist
	userns string // the pod's user namespace; default none (the host's)
	edits  int    // EditSpec calls
	// between, when set, makes EditSpec what containerd's is: a Get of a
	// copy, the edit, then an Update of the whole spec, with between
	// called after the Get (and no lock held across it).
	between func(id string)
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
	if f.between != nil {
		return f.getThenUpdate(ctx, id, edit)
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

// getThenUpdate is EditSpec as containerdAPI's: a Get, the edit of what
// it read, and an Update of the whole spec, with no version.
func (f *fakeSpecs) getThenUpdate(ctx context.Context, id string, edit func(*specs.Spec) ([]oci.Opt, error)) error {
	s, err := f.Spec(ctx, id)
	if err != nil {
		return err
	}
	var c specs.Spec // a deep copy: what containerd's Get decodes
	b, _ := json.Marshal(s)
	if err := json.Unmarshal(b, &c); err != nil {
		return err
	}
	f.between(id)
	opts, err := edit(&c)
	if err != nil {
		return err
	}
	if err := oci.Apply(&c, opts...); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.edits++
	f.specs[id] = &c
	return nil
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

// fakeMetrics records what the server reports.
type fakeMetrics struct {
	mu        sync.Mutex
	calls     []string // "method code"
	targeting []string // "namespace/stage/result/reason"
}

func (f *fakeMetrics) Call(method string, code codes.Code, _ time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, method+" "+code.String())
}

func (f *fakeMetrics) Targeting(namespace, stage, result, reason string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.targeting = append(f.targeting, strings.Join([]string{namespace, stage, result, reason}, "/"))
}

func (f *fakeMetrics) outcomes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Sorted(slices.Values(f.targeting))
}

// recorder keeps what it is given, in order, for any goroutine.
type recorder[T any] struct {
	mu  sync.Mutex
	got []T
}

func (r *recorder[T]) add(v T) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.got = append(r.got, v)
}

func (r *recorder[T]) list() []T {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.got)
}

// sink is an EventSink that keeps what it is given.
type sink struct{ recorder[Event] }

func (s *sink) Post(e Event) { s.add(e) }

func (s *sink) posted() []Event { return s.list() }

// fakeLookup is containerd's metadata of the targets: each is in the
// sandbox that sandbox answers, and its task is tasks'.
type fakeLookup struct {
	sandbox func(id string) (string, error)
	tasks   taskLookup
}

func (f fakeLookup) CRIContainer(ctx context.Context, id string) (criContainer, error) {
	sb, err := f.sandbox(id)
	pid, pidErr := f.tasks.TaskPID(ctx, id)
	return criContainer{Sandbox: sb, Name: "app", PID: pid, PIDErr: pidErr}, err
}

// flakyCRI is the backend's CRI, or down.
type flakyCRI struct {
	backendCRI
	down atomic.Bool
}

func (f *flakyCRI) Version(ctx context.Context, in *runtimeapi.VersionRequest, opts ...grpc.CallOption) (*runtimeapi.VersionResponse, error) {
	if f.down.Load() {
		return nil, status.Error(codes.Unavailable, "connection refused")
	}
	return f.backendCRI.Version(ctx, in, opts...)
}

// fakeContainerd serves the part of containerd's own API the shim uses:
// containers Get/Update and tasks Get. It stands in for containerd only in
// unit tests.
type fakeContainerd struct {
	containers.UnimplementedContainersServer

	mu      sync.Mutex
	ctrs    map[string]*containers.Container
	procs   map[string]*task.Process
	updates []*containers.UpdateContainerRequest
	ns      []string // the containerd-namespace header of each call
}

func (f *fakeContainerd) namespace(ctx context.Context) {
	md, _ := metadata.FromIncomingContext(ctx)
	f.ns = append(f.ns, md.Get("containerd-namespace")...)
}

func (f *fakeContainerd) Get(ctx context.Context, req *containers.GetContainerRequest) (*containers.GetContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.namespace(ctx)
	c, ok := f.ctrs[req.GetID()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "container %q: not found", req.GetID())
	}
	return &containers.GetContainerResponse{Container: c}, nil
}

func (f *fakeContainerd) Update(ctx context.Context, req *containers.UpdateContainerRequest) (*containers.UpdateContainerResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.namespace(ctx)
	f.updates = append(f.updates, req)
	c := f.ctrs[req.GetContainer().GetID()]
	c.Spec = req.GetContainer().GetSpec() // as containerd applies the mask "spec"
	return &containers.UpdateContainerResponse{Container: c}, nil
}

// getTask is the tasks service's Get (taskServer; Get is the containers one).
func (f *fakeContainerd) getTask(ctx context.Context, req *tasks.GetRequest) (*tasks.GetResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.namespace(ctx)
	p, ok := f.procs[req.GetContainerID()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "task %q: not found", req.GetContainerID())
	}
	return &tasks.GetResponse{Process: p}, nil
}

type taskServer struct {
	tasks.UnimplementedTasksServer
	f *fakeContainerd
}

func (s taskServer) Get(ctx context.Context, req *tasks.GetRequest) (*tasks.GetResponse, error) {
	return s.f.getTask(ctx, req)
}

// notUTF8Codec is the fake's codec: what it sends has every "~X4~" made
// bytes that are not UTF-8, as containerd stores labels a client sent.
type notUTF8Codec struct{}

func (notUTF8Codec) Name() string { return "proto" }

func (notUTF8Codec) Marshal(v any) (mem.BufferSlice, error) {
	b, err := proto.Marshal(v.(proto.Message))
	return mem.BufferSlice{mem.SliceBuffer(bytes.ReplaceAll(b, []byte("~X4~"), []byte("a\xff\xfeb")))}, err
}

func (notUTF8Codec) Unmarshal(data mem.BufferSlice, v any) error {
	return proto.Unmarshal(data.Materialize(), v.(proto.Message))
}

func newFakeContainerd(t *testing.T) (*fakeContainerd, containerdAPI) {
	t.Helper()
	f := &fakeContainerd{ctrs: map[string]*containers.Container{}, procs: map[string]*task.Process{}}
	s := grpc.NewServer(grpc.ForceServerCodecV2(notUTF8Codec{}))
	containers.RegisterContainersServer(s, f)
	tasks.RegisterTasksServer(s, taskServer{f: f})
	lis := bufconn.Listen(1 << 20)
	go s.Serve(lis)
	t.Cleanup(s.Stop)
	return f, newContainerdAPI(lenientConn{dialMem(t, lis)}, "k8s.io")
}

func specAny(t *testing.T, s *specs.Spec) *anypb.Any {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return &anypb.Any{TypeUrl: "types.containerd.io/opencontainers/runtime-spec/1/Spec", Value: b}
}

// nriRuntime is NRI's runtime side as containerd 2.x runs it (the
// adaptation package), in this process, with a socket of its own.
func nriRuntime(t testing.TB, opts ...adaptation.Option) (*adaptation.Adaptation, string) {
	t.Helper()
	return nriRuntimeOf(t, "v2.4.2", opts...)
}

// nriRuntimeOf is nriRuntime as containerd of that version runs it.
func nriRuntimeOf(t testing.TB, version string, opts ...adaptation.Option) (*adaptation.Adaptation, string) {
	t.Helper()
	a, socket := unstartedNRIRuntime(t, version, opts...)
	if err := a.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Stop)
	return a, socket
}

// unstartedNRIRuntime is nriRuntimeOf's runtime before its Start: nothing
// listens on its socket yet.
func unstartedNRIRuntime(t testing.TB, version string, opts ...adaptation.Option) (*adaptation.Adaptation, string) {
	t.Helper()
	quietNRI.Do(func() { nrilog.Set(quietLog{}) }) // a global: set once, before any runtime runs
	dir, err := os.MkdirTemp("", "nri")            // short: a unix socket path
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	socket := filepath.Join(dir, "nri.sock")
	sync := func(ctx context.Context, cb adaptation.SyncCB) error {
		_, err := cb(ctx, nil, nil)
		return err
	}
	update := func(context.Context, []*adaptation.ContainerUpdate) ([]*adaptation.ContainerUpdate, error) {
		return nil, nil
	}
	a, err := adaptation.New("containerd", version, sync, update, append([]adaptation.Option{adaptation.WithSocketPath(socket),
		adaptation.WithPluginPath(filepath.Join(dir, "plugins")), adaptation.WithPluginConfigPath(filepath.Join(dir, "conf"))}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return a, socket
}

// quietLog silences NRI's own log in tests.
type quietLog struct{}

var quietNRI sync.Once

func (quietLog) Debugf(context.Context, string, ...any) {}

func (quietLog) Infof(context.Context, string, ...any) {}

func (quietLog) Warnf(context.Context, string, ...any) {}

func (quietLog) Errorf(context.Context, string, ...any) {}

// nriEvent is containerd's NRI CreateContainer event for container id,
// inside its CreateContainer: an error fails the create, which makes nothing.
func (r *rig) nriEvent(id string, req *runtimeapi.CreateContainerRequest) error {
	spec := r.specs.made()
	c := &nriapi.Container{Id: id, PodSandboxId: req.GetPodSandboxId(), Name: req.GetConfig().GetMetadata().GetName(),
		Annotations: maps.Clone(req.GetConfig().GetAnnotations()), Linux: &nriapi.LinuxContainer{}}
	for _, n := range spec.Linux.Namespaces {
		c.Linux.Namespaces = append(c.Linux.Namespaces, &nriapi.LinuxNamespace{Type: string(n.Type), Path: n.Path})
	}
	for _, m := range spec.Mounts {
		c.Mounts = append(c.Mounts, &nriapi.Mount{Destination: m.Destination, Type: m.Type, Source: m.Source, Options: m.Options})
	}
	resp, err := r.nri.CreateContainer(context.Background(), &nriapi.CreateContainerRequest{Pod: &nriapi.PodSandbox{Id: req.GetPodSandboxId()}, Container: c})
	if err != nil {
		// as containerd's CRI answers it
		return fmt.Errorf("failed to create containerd container: failed to get NRI adjustment for container: %w", err)
	}
	if r.nriFail != nil {
		return r.nriFail // the create fails after the event: nothing is made
	}
	adj := resp.GetAdjust()
	if err := applyAdjustment(spec, adj); err != nil {
		return err
	}
	r.specs.mu.Lock()
	r.specs.specs[id] = spec
	r.specs.mu.Unlock()
	if len(adj.GetAnnotations()) > 0 {
		r.adjusted[id] = adj
	}
	return nil
}

// applyAdjustment applies an NRI answer (adj) to s as containerd's CRI
// does (internal/cri/nri, WithContainerAdjustment): NRI's own generate
// package over runtime-tools' spec generator. So the NRI path's tests
// check containerd's application of the shim's adjustment, not the shim's
// own spec options.
func applyAdjustment(s *specs.Spec, adj *nriapi.ContainerAdjustment) error {
	g := rgen.Generator{Config: s}
	return nrigen.SpecGenerator(&g).Adjust(adj)
}

// otherPlugin connects another NRI plugin to r's NRI runtime, ordered
// before the shim, that sets the given namespace of every container.
func otherPlugin(t *testing.T, r *rig, kind string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	st, err := stub.New(namespaceSetter(kind), stub.WithPluginName("other"), stub.WithPluginIdx("10"), stub.WithSocketPath(r.nriSocket))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Stop(); cancel() })
	// registered once the runtime sends it events
	probe := &nriapi.CreateContainerRequest{Pod: &nriapi.PodSandbox{Id: "probe"}, Container: &nriapi.Container{Id: "probe", Linux: &nriapi.LinuxContainer{}}}
	waitFor(t, "the other plugin to register", func() bool {
		resp, err := r.nri.CreateContainer(ctx, probe)
		return err == nil && len(resp.GetAdjust().GetLinux().GetNamespaces()) > 0
	})
}

// namespaceSetter is an NRI plugin that sets one namespace's path.
type namespaceSetter string

func (k namespaceSetter) CreateContainer(context.Context, *nriapi.PodSandbox, *nriapi.Container) (*nriapi.ContainerAdjustment, []*nriapi.ContainerUpdate, error) {
	adj := &nriapi.ContainerAdjustment{}
	adj.AddOrReplaceNamespace(&nriapi.LinuxNamespace{Type: string(k), Path: "/proc/other/ns/" + string(k)})
	return adj, nil, nil
}

// validatorConfig configures NRI's default validator.
type validatorConfig = validator.DefaultValidatorConfig
