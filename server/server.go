package server

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// discardTimeout bounds the clean-up of a container the shim will not keep.
const discardTimeout = 30 * time.Second

// MaxMsgSize bounds CRI messages in both directions, as kubelet does.
const MaxMsgSize = 16 << 20

// Options wires a Server to its backends.
type Options struct {
	// Backend is the connection to the backend's CRI socket.
	Backend *grpc.ClientConn
	// Containerd is a connection to the same containerd's own API.
	Containerd *grpc.ClientConn
	// ContainerdNamespace is the containerd namespace of CRI objects (k8s.io).
	ContainerdNamespace string
	// StateDir holds the pins, under StateDir/pins.
	StateDir string
	// Strict turns every targeting fallback into an error.
	Strict bool
	Log    *logrus.Entry
	// Metrics receives per-call and targeting measurements; nil: none.
	Metrics Metrics
	// Dial opens a connection of the shim's own to the backend's CRI socket
	// for each client connection, which is then relayed frame by frame
	// (relay.go). Nil, or when it fails, the client connection is served by
	// the shim's grpc.Server, forwarding through Backend.
	Dial func(ctx context.Context) (net.Conn, error)
}

// Interfaces the handlers need, small so unit tests can fake them.
type (
	// backendCRI is the typed part of the backend's CRI the shim calls itself.
	backendCRI interface {
		ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
		RemoveContainer(ctx context.Context, in *runtimeapi.RemoveContainerRequest, opts ...grpc.CallOption) (*runtimeapi.RemoveContainerResponse, error)
		Version(ctx context.Context, in *runtimeapi.VersionRequest, opts ...grpc.CallOption) (*runtimeapi.VersionResponse, error)
	}
	taskLookup interface {
		TaskPID(ctx context.Context, id string) (uint32, error)
	}
	specEditor interface {
		EditSpec(ctx context.Context, id string, edit func(*specs.Spec) ([]oci.Opt, error)) error
	}
	pinStore interface {
		Paths(id string, hs []*namespaces.Handle) (map[namespaces.Kind]string, error)
		Hold(id string, hs []*namespaces.Handle) error
		Path(id string, kind namespaces.Kind) (string, bool)
		Release(id string) error
		IDs() ([]string, error)
	}
)

// Server is the CRI proxy.
type Server struct {
	proxy   proxy
	hooks   map[string]hook
	cri     backendCRI
	tasks   taskLookup
	specs   specEditor
	pins    pinStore
	openNS  func(pid int, kinds []namespaces.Kind, verify func() error) ([]*namespaces.Handle, error)
	hasInit func(path string) (bool, error)
	strict  bool
	log     *logrus.Entry
	grpc    *grpc.Server
	metrics Metrics        // nil: none
	health  *health.Server // grpc.health.v1 on the CRI socket (health.go)
	local   map[string]localHandler
	conns   connSet // relay.go, serve.go
}

// fallbackKeepalive closes connections served by the grpc.Server (GOAWAY)
// after age, letting calls in flight finish for up to a minute.
func fallbackKeepalive(age time.Duration) grpc.ServerOption {
	return grpc.KeepaliveParams(keepalive.ServerParameters{MaxConnectionAge: age, MaxConnectionAgeGrace: time.Minute})
}

// New builds a Server from opts.
func New(opts Options) *Server {
	api := newContainerdAPI(opts.Containerd, opts.ContainerdNamespace)
	var grpcOpts []grpc.ServerOption
	if opts.Dial != nil {
		// a connection served here because the backend could not be
		// reached is closed (GOAWAY) after a while, so that the client's
		// next connection is relayed again
		grpcOpts = append(grpcOpts, fallbackKeepalive(fallbackAge))
	}
	s := newServer(opts.Backend, runtimeapi.NewRuntimeServiceClient(opts.Backend), api, api,
		pinDir{dir: filepath.Join(opts.StateDir, "pins")}, opts.Strict, opts.Log, grpcOpts...)
	s.metrics = opts.Metrics
	s.conns.dial = opts.Dial
	return s
}

func newServer(backend *grpc.ClientConn, cri backendCRI, tasks taskLookup, specs specEditor, pins pinStore, strict bool, log *logrus.Entry, grpcOpts ...grpc.ServerOption) *Server {
	if log == nil {
		log = logrus.NewEntry(logrus.StandardLogger())
	}
	s := &Server{
		proxy:   proxy{backend: backend, codec: newRawCodec()},
		cri:     cri,
		tasks:   tasks,
		specs:   specs,
		pins:    pins,
		openNS:  namespaces.Open,
		hasInit: namespaces.HasInit,
		strict:  strict,
		log:     log,
	}
	s.hooks = map[string]hook{
		"/runtime.v1.RuntimeService/CreateContainer":  s.createContainer,
		"/runtime.v1.RuntimeService/StartContainer":   s.startContainer,
		"/runtime.v1.RuntimeService/RemoveContainer":  s.removeContainer,
		"/runtime.v1.RuntimeService/RemovePodSandbox": s.removePodSandbox,
	}
	s.grpc = grpc.NewServer(append([]grpc.ServerOption{
		grpc.UnknownServiceHandler(s.handleUnknown),
		grpc.ForceServerCodecV2(s.proxy.codec),
		grpc.MaxRecvMsgSize(MaxMsgSize),
		grpc.MaxSendMsgSize(MaxMsgSize),
		grpc.SharedWriteBuffer(true),
		// reuse handler goroutines instead of starting (and growing the
		// stack of) one per call: about 15 us a call here
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}, grpcOpts...)...)
	s.registerCRI()
	s.registerHealth()
	s.local = s.localHandlers()
	return s
}

// registerCRI registers the RuntimeService and ImageService as cri-api
// declares them, every method a raw forwarder: known unary methods then take
// grpc's unary path, the cheapest it has. Methods this build does not know
// reach handleUnknown.
func (s *Server) registerCRI() {
	for _, sd := range []grpc.ServiceDesc{runtimeapi.RuntimeService_ServiceDesc, runtimeapi.ImageService_ServiceDesc} {
		desc := grpc.ServiceDesc{ServiceName: sd.ServiceName, HandlerType: (*any)(nil), Metadata: sd.Metadata}
		for _, m := range sd.Methods {
			method := "/" + sd.ServiceName + "/" + m.MethodName
			desc.Methods = append(desc.Methods, grpc.MethodDesc{MethodName: m.MethodName, Handler: s.unaryHandler(method)})
		}
		for _, st := range sd.Streams {
			method := "/" + sd.ServiceName + "/" + st.StreamName
			desc.Streams = append(desc.Streams, grpc.StreamDesc{StreamName: st.StreamName, ServerStreams: st.ServerStreams, ClientStreams: st.ClientStreams,
				Handler: func(_ any, ss grpc.ServerStream) error {
					return s.instrument(method, func() error { return s.proxy.stream(ss, method) })
				}})
		}
		s.grpc.RegisterService(&desc, s)
	}
}

// unaryHandler forwards one known unary method, through its hook if any.
func (s *Server) unaryHandler(method string) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	h := s.hooks[method]
	return func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var out *frame
		err := s.instrument(method, func() error {
			in := new(frame)
			if err := dec(in); err != nil {
				return err
			}
			var err error
			out, err = s.proxy.unary(ctx, method, in, h, grpcSink{ctx})
			return err
		})
		if err != nil {
			return nil, err
		}
		return out, nil
	}
}

// handleUnknown pipes a method this build does not know, of any shape.
func (s *Server) handleUnknown(_ any, ss grpc.ServerStream) error {
	method, _ := grpc.MethodFromServerStream(ss)
	return s.instrument(method, func() error { return s.proxy.stream(ss, method) })
}

// instrument is the boundary every call passes: it turns errors into a gRPC
// status once, contains panics, and observes the call once.
func (s *Server) instrument(method string, call func() error) (err error) {
	start := time.Now()
	defer func() {
		// grpc does not recover handler panics: one bad request must not take
		// down the runtime path of every pod on the node.
		if r := recover(); r != nil {
			s.log.WithFields(logrus.Fields{"method": method, "panic": r, "stack": string(debug.Stack())}).Error("handler panicked")
			err = status.Errorf(codes.Internal, "cri-nstarget: internal error in %s", method)
		}
		s.observe(method, start, err)
	}()
	return toStatus(call())
}

// ReleaseStale releases the pins of containers the backend no longer has.
// The pin list is read before the backend's container list, so a pin made
// for a container created meanwhile is never taken for stale.
func (s *Server) ReleaseStale(ctx context.Context) error {
	ids, err := s.pins.IDs()
	if err != nil || len(ids) == 0 {
		return err
	}
	resp, err := s.cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return fmt.Errorf("release stale pins: list backend containers: %w", err)
	}
	live := make(map[string]bool, len(resp.GetContainers()))
	for _, c := range resp.GetContainers() {
		live[c.GetId()] = true
	}
	for _, id := range ids {
		if live[id] {
			continue
		}
		if err := s.pins.Release(id); err != nil {
			return err
		}
		s.log.WithField("container", id).Info("released pins of a container the backend no longer has")
	}
	return nil
}
