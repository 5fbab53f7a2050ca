package server

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	"google.golang.org/grpc/keepalive"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/intents"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/nriplugin"
	"github.com/cri-nstarget/cri-nstarget/pins"
)

// MaxMsgSize bounds CRI messages in both directions, as kubelet does.
const MaxMsgSize = 16 << 20

// Bounds on what one user of the CRI socket can make the shim hold. kubelet
// uses one connection per service with a few dozen calls in flight and a few
// hundred bytes of metadata per call; grpc-go clients queue calls beyond
// MaxConcurrentStreams rather than fail them.
const (
	// MaxConcurrentStreams is the most calls in flight on one connection.
	MaxConcurrentStreams = 256
	// MaxHeaderListSize bounds the (uncompressed) metadata of one call.
	MaxHeaderListSize = 64 << 10
	// PrefaceTimeout bounds how long a new connection may take to send the
	// HTTP/2 preface and settings.
	PrefaceTimeout = 5 * time.Second
)

// enforcement is the keepalive policy for clients' pings. kubelet's CRI
// client (k8s.io/cri-client) sets no keepalive: its only pings are grpc's
// BDP pings, which follow data the shim sent and never count as strikes. The
// policy still lets any grpc-go client's keepalive through (grpc-go never
// pings more often than every 10 s, with or without calls in flight), and
// bounds a ping flood from anything else: too many pings closes that
// connection (GOAWAY ENHANCE_YOUR_CALM).
var enforcement = keepalive.EnforcementPolicy{MinTime: 10 * time.Second, PermitWithoutStream: true}

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
	// TargetingVia is how targeted specs are written: ViaAuto (NRI where
	// the backend offers it, else the Update path), ViaNRI (only NRI:
	// TARGET creates are refused while it is not usable) or ViaUpdate.
	TargetingVia string
	// NRISocket is containerd's NRI socket.
	NRISocket string
	// Events takes the Events on pods that say whether a container joined
	// its target (package events); nil: none.
	Events EventSink
	// HandlersWithoutJoin lists the runtime handlers whose runtime does not
	// join namespace paths, comma-separated; HandlersAuto among them adds
	// those whose containerd runtime type is not runc's.
	HandlersWithoutJoin string
	// Mode is ModeProxy (""), or ModePlugin: no CRI socket is served (the
	// Server is not Served), Backend is containerd's own CRI, and the
	// targeting is done in containerd's NRI events alone.
	Mode string
	// Refused, in the plugin mode, is told (on the NRI stub's goroutine:
	// it must be quick) when containerd is seen refusing the plugin's
	// namespace adjustments, and what was seen; nil: only the log says so.
	Refused func(why string)
}

// Server is the CRI proxy: one grpc.Server whose every CRI method forwards
// raw frames to the backend (passthrough.go), the intercepted ones through
// the targeting hooks of target (targeter.go). It holds no lock of its own:
// the state it shares between calls is grpc's, the health server's, the
// pins on disk and containerd's. Every field is set by newServer, in one
// literal, from one deps value, and never changes after (but ran, which Run
// sets); New starts nothing, Run starts it.
type Server struct {
	proxy   proxy
	hooks   map[string]hook // intercepted method -> its handler
	target  *targeter
	nri     *nriplugin.Plugin // nil: the Update path only
	plugin  *pluginMode       // the plugin mode; nil: the proxy
	log     *logrus.Entry
	grpc    *grpc.Server   // nil in the plugin mode
	metrics Metrics        // nil: none
	health  *health.Server // grpc.health.v1 on the CRI socket (health.go)
	version versioner      // the backend's CRI Version, the health check's question
	// life is the server's lifetime: it ends when Shutdown begins (stop),
	// and with it the streams the proxy pipes, the reconciler's loop and
	// the NRI connection, each of which is handed life.
	life context.Context
	stop context.CancelFunc
	// bg are the goroutines that live as long as life: the side queue's,
	// the reader of containerd's events, the NRI connection's and the
	// reconciler's loop. Shutdown waits for them.
	bg *goroutines
	// What Run starts: what happens after the answers (its side queue),
	// containerd's events (nil: none), handed to it, and why NRI must not
	// connect (nriOff, the plugin mode's pins unnamed; nil: it may).
	after  *afterAnswer
	events *taskEvents
	nriOff error
	ran    atomic.Bool // Run was called
}

// New builds a Server from opts, and starts nothing (Run does). With
// TargetingVia other than ViaUpdate, once Run, it connects to containerd's
// NRI as a plugin, and keeps reconnecting, until Shutdown.
func New(opts Options) *Server {
	log := opts.Log
	if log == nil {
		log = logrus.NewEntry(logrus.StandardLogger())
	}
	// the shim's own calls decode answers whatever labels containers carry
	api := newContainerdAPI(lenientConn{opts.Containerd}, opts.ContainerdNamespace)
	cri := runtimeapi.NewRuntimeServiceClient(lenientConn{opts.Backend})
	d := deps{
		backend:  opts.Backend,
		cri:      cri,
		tasks:    api,
		specs:    api,
		lookup:   api,
		metadata: api,
		states:   api,
		events:   newTaskEvents(opts.Containerd, opts.ContainerdNamespace, log),
		host:     ownPIDNamespace(log),
		pins:     pins.New(pins.Under(opts.StateDir)),
		intents:  intents.New(filepath.Join(opts.StateDir, "intents")),
		handlers: newHandlers(cri, log, opts.HandlersWithoutJoin, filepath.Join(opts.StateDir, "runtime-handlers.json")),
		kernel:   hostKernel(),
		strict:   opts.Strict,
		log:      log,
		metrics:  opts.Metrics,
		sink:     opts.Events,
		refused:  opts.Refused,
	}
	switch {
	case opts.Mode == ModePlugin:
		d.nri, d.plugin = newNRI(opts.NRISocket, log, opts.Metrics, pluginPathOf), true
		d.pins, d.names, d.pinsOff = pluginPins(opts.StateDir)
	case opts.TargetingVia != ViaUpdate:
		d.nri, d.nriOnly = newNRI(opts.NRISocket, log, opts.Metrics, pathOf), opts.TargetingVia == ViaNRI
	}
	return newServer(d)
}

// deps is everything a Server is built on, complete before it is built
// (newServer), and never patched after: New makes it from Options, the
// unit tests' rig from fakes.
type deps struct {
	backend  *grpc.ClientConn // the backend's CRI socket, for the raw proxy
	cri      backendCRI       // the same, typed, for the shim's own calls
	tasks    taskLookup
	specs    specEditor
	lookup   criContainers     // nil: targets are resolved through the CRI only
	metadata containerMetadata // the plugin mode: containerd's metadata (Exists); nil: none
	states   taskStates        // containerd's word on tasks, for the check after a start; nil: no check
	events   *taskEvents       // containerd's task events; nil: no event reader
	host     namespaces.ID     // the shim's own PID namespace: the host's (the check after a start)
	pins     pinStore
	intents  intentStore
	handlers *handlers // nil: every runtime handler is taken to join
	kernel   kernel
	nri      *nriplugin.Plugin // nil: the Update path only
	nriOnly  bool              // refuse TARGET creates while NRI is not usable
	plugin   bool              // the plugin mode: nri watches every container, no CRI is served
	names    pinNames          // the plugin mode: its pins' names, through its root; nil: none told apart
	pinsOff  error             // the plugin mode: why its pins' names reach nothing (nri never connects); nil: they do
	strict   bool
	log      *logrus.Entry // nil: logrus' standard logger
	metrics  Metrics       // nil: none
	sink     EventSink     // nil: no Events
	refused  func(string)  // the plugin mode's Options.Refused; nil: none
	// grpcOpts come after the shim's own server options (tests use them to
	// observe connections).
	grpcOpts []grpc.ServerOption
}

// kernel is the kernel's side of targeting (package namespaces), replaced in
// unit tests.
type kernel struct {
	openNS func(pid int, kinds []namespaces.Kind) ([]*namespaces.Handle, error)
	// openIdentified is openNS, and what /proc says of the process.
	openIdentified func(pid int, kinds []namespaces.Kind) ([]*namespaces.Handle, namespaces.Identity, error)
	hasInit        func(path string) (bool, error)
	// of reads a process's namespaces through a pidfd (the check after a
	// start).
	of      func(pid int, kinds []namespaces.Kind) (map[namespaces.Kind]namespaces.ID, error)
	canJoin func(h *namespaces.Handle, userns string) (bool, error)
	stat    func(path string) (namespaces.ID, error)
}

// hostKernel is the kernel's side as the shim uses it.
func hostKernel() kernel {
	return kernel{openNS: namespaces.Open, openIdentified: namespaces.OpenIdentified, hasInit: namespaces.HasInit, of: namespaces.Of, canJoin: namespaces.CanJoin, stat: namespaces.Stat}
}

// WaitTargetingPath waits, up to ctx, for the first attempt to connect to
// containerd's NRI (if the server uses it), so that the first creates served
// already take the path the backend offers.
func (s *Server) WaitTargetingPath(ctx context.Context) {
	if s.nri == nil {
		return
	}
	select {
	case <-s.nri.Tried():
	case <-ctx.Done():
	}
}

// TargetingPath says how targeted specs are written now (ViaNRI or
// ViaUpdate) and why.
func (s *Server) TargetingPath() (string, string) {
	if s.nri == nil {
		return ViaUpdate, "the Update path is configured"
	}
	usable, why := s.nri.Usable()
	if s.plugin != nil {
		return pluginPathOf(usable), why
	}
	return pathOf(usable), why
}

// newServer builds a Server on d, and starts nothing: Run starts what
// lives as long as it. Every field, the Server's and the targeter's, is set
// in one struct literal, from d. The Server is allocated before its literal
// only so that the grpc.Server's handlers can name it. In the plugin mode it
// builds no grpc.Server: the NRI plugin watches every container instead.
func newServer(d deps) *Server {
	log := d.log
	if log == nil {
		log = logrus.NewEntry(logrus.StandardLogger())
	}
	life, stop := context.WithCancel(context.Background())
	var dropped func(string)
	if m, ok := d.metrics.(dropRecorder); ok {
		dropped = m.Dropped
	}
	bg := &goroutines{}
	records := newRecords(d.specs)
	report := reporter{log: log, metrics: d.metrics, events: d.sink}
	after := newAfterAnswer(afterDeps{life: life, dropped: dropped, records: records, pins: d.pins, cri: d.cri, states: d.states, subscribed: subscribedOf(d.events),
		handlers: d.handlers, of: d.kernel.of, hasInit: d.kernel.hasInit, host: d.host, report: report, strict: d.strict, log: log})
	report.later = after.side.logLater // the creates' outcome lines, once answered; after's own jobs write theirs at once
	t := newTargeter(d, life, bg, records, report, after, log)
	s := new(Server)
	var plugin *pluginMode
	var g *grpc.Server
	var hs *health.Server
	var px proxy
	var hooks map[string]hook
	if d.plugin {
		plugin = &pluginMode{t: t, refused: d.refused, procs: newProcs(d.cri, d.tasks), life: life, names: d.names, self: os.Getpid(), metadata: d.metadata}
	} else {
		px = proxy{backend: d.backend, codec: newRawCodec(), stopping: life}
		hooks, hs = hooksOf(t), health.NewServer()
		g = s.newGRPC(px.codec, hooks, hs, d.grpcOpts)
	}
	*s = Server{proxy: px, hooks: hooks, target: t, nri: d.nri, plugin: plugin, log: log, grpc: g, metrics: d.metrics, health: hs, version: d.cri,
		life: life, stop: stop, bg: bg, after: after, events: d.events, nriOff: d.pinsOff}
	return s
}

// Run starts the server, once, in this order, each step after the one
// before it has returned:
//
//  1. in the plugin mode, the release of the pins an earlier process of the
//     plugin left (releaseEarlier), then a trial pin (canPin);
//  2. the start-up reconcile (Reconcile: the pods' runtime handlers, what
//     unfinished creates left, stale pins), bounded by ctx; when it fails
//     the reconciler's loop retries it in the background;
//  3. the side queue's goroutine;
//  4. the reader of containerd's events (when the server has them), whose
//     first subscription schedules the catch-up (catchUp) on the side
//     queue: so the catch-up never runs before the start-up reconcile;
//  5. the NRI connection (when the server uses NRI), which keeps
//     reconnecting until Shutdown; or NRI turned off when the plugin mode's
//     pins cannot be named to the runtime, or its trial pin failed.
//
// It returns the start-up reconcile's error, nil when it succeeded. Serve
// may be called before Run, but the calls it serves then take the Update
// path and queue their checks until Run; cmd/cri-nstarget runs, then
// serves. Shutdown waits for everything Run started.
func (s *Server) Run(ctx context.Context) error {
	if !s.ran.CompareAndSwap(false, true) {
		return errors.New("server: Run called twice")
	}
	off := s.nriOff
	if s.plugin != nil {
		s.plugin.releaseEarlier()
		if off == nil {
			off = s.plugin.canPin()
		}
	}
	err := s.Reconcile(ctx)
	s.bg.start(s.after.run)
	if s.events != nil {
		s.bg.start(func() { s.events.run(s.life, s.after) })
	}
	switch {
	case s.nri != nil && off != nil:
		s.log.WithError(off).Error("the plugin mode cannot pin, or cannot name its pins to the runtime: not connecting to containerd's NRI")
		s.nri.Off(off.Error())
	case s.nri != nil:
		if s.plugin != nil {
			s.nri.Watch(s.plugin)
		}
		s.bg.start(func() { s.nri.Run(s.life) })
	}
	return err
}

// newTargeter is the targeting of a Server built on d: the containers'
// records through records (their one owner), what it decided said through
// report, and what comes after its answers handed to after.
func newTargeter(d deps, life context.Context, bg *goroutines, records *records, report reporter, after afterHooks, log *logrus.Entry) *targeter {
	adapter, removals := nriOf(d.nri)
	return &targeter{
		recon:    newReconciler(life, bg, d.cri, d.pins, d.intents, log),
		report:   report,
		cri:      d.cri,
		tasks:    d.tasks,
		records:  records,
		pins:     d.pins,
		lookup:   d.lookup,
		kernel:   d.kernel,
		strict:   d.strict,
		log:      log,
		nri:      adapter,
		removals: removals,
		nriOnly:  d.nriOnly,
		after:    after,
		handlers: d.handlers,
	}
}

// nriOf is p as the targeter's NRI boundary and removal gate; nil
// interfaces when p is nil (the Update path only).
func nriOf(p *nriplugin.Plugin) (nriAdapter, removalGate) {
	if p == nil {
		return nil, nil
	}
	return p, p
}

// hooksOf are the intercepted methods' handlers, t's.
func hooksOf(t *targeter) map[string]hook {
	return map[string]hook{
		"/runtime.v1.RuntimeService/RunPodSandbox":    t.runPodSandbox,
		"/runtime.v1.RuntimeService/CreateContainer":  t.createContainer,
		"/runtime.v1.RuntimeService/StartContainer":   t.startContainer,
		"/runtime.v1.RuntimeService/RemoveContainer":  t.removeContainer,
		"/runtime.v1.RuntimeService/RemovePodSandbox": t.removePodSandbox,
	}
}

// newGRPC builds the proxy's grpc.Server: every CRI method forwards to the
// backend through s's proxy, the intercepted ones through hooks; hs serves
// grpc.health.v1. grpc.NewServer starts its stream workers, grpc's own,
// which Shutdown's stop of the grpc.Server ends.
func (s *Server) newGRPC(codec rawCodec, hooks map[string]hook, hs *health.Server, opts []grpc.ServerOption) *grpc.Server {
	g := grpc.NewServer(append([]grpc.ServerOption{
		grpc.UnknownServiceHandler(s.handleUnknown),
		grpc.ForceServerCodecV2(codec),
		grpc.MaxRecvMsgSize(MaxMsgSize),
		grpc.MaxSendMsgSize(MaxMsgSize),
		grpc.MaxConcurrentStreams(MaxConcurrentStreams),
		grpc.MaxHeaderListSize(MaxHeaderListSize),
		grpc.ConnectionTimeout(PrefaceTimeout),
		grpc.KeepaliveEnforcementPolicy(enforcement),
		// reuse handler goroutines instead of starting (and growing the
		// stack of) one per call
		grpc.NumStreamWorkers(uint32(runtime.GOMAXPROCS(0))),
	}, opts...)...)
	s.registerCRI(g, hooks)
	registerHealth(g, hs)
	return g
}

// ownPIDNamespace is the shim's own PID namespace: the host's. Without it, a VM
// runtime's process on the host cannot be told from a container's.
func ownPIDNamespace(log *logrus.Entry) namespaces.ID {
	host, err := namespaces.Stat("/proc/self/ns/pid")
	if err != nil {
		log.WithError(err).Warn("read the shim's own PID namespace: a VM runtime's process on the host cannot be told from a container's")
	}
	return host
}

// dropRecorder is a Metrics that counts what the side queue dropped.
type dropRecorder interface {
	Dropped(channel string)
}

// registerCRI registers the RuntimeService and ImageService as cri-api
// declares them, every method a raw forwarder: known unary methods then take
// grpc's unary path, the cheapest it has. Methods this build does not know
// reach handleUnknown.
func (s *Server) registerCRI(g *grpc.Server, hooks map[string]hook) {
	for _, sd := range []grpc.ServiceDesc{runtimeapi.RuntimeService_ServiceDesc, runtimeapi.ImageService_ServiceDesc} {
		desc := grpc.ServiceDesc{ServiceName: sd.ServiceName, HandlerType: (*any)(nil), Metadata: sd.Metadata}
		for _, m := range sd.Methods {
			method := "/" + sd.ServiceName + "/" + m.MethodName
			desc.Methods = append(desc.Methods, grpc.MethodDesc{MethodName: m.MethodName, Handler: s.unaryHandler(method, hooks[method])})
		}
		for _, st := range sd.Streams {
			method := "/" + sd.ServiceName + "/" + st.StreamName
			desc.Streams = append(desc.Streams, grpc.StreamDesc{StreamName: st.StreamName, ServerStreams: st.ServerStreams, ClientStreams: st.ClientStreams,
				Handler: func(_ any, ss grpc.ServerStream) error {
					return s.instrument(method, func() error { return s.proxy.stream(ss, method) })
				}})
		}
		g.RegisterService(&desc, s)
	}
}

// unaryHandler forwards one known unary method, through its hook h if any.
func (s *Server) unaryHandler(method string, h hook) func(any, context.Context, func(any) error, grpc.UnaryServerInterceptor) (any, error) {
	return func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var out *frame
		err := s.instrument(method, func() error {
			in := new(frame)
			if err := dec(in); err != nil {
				return err
			}
			var err error
			out, err = s.proxy.unary(ctx, method, in, h)
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

// Serve serves CRI on lis until Shutdown; not in the plugin mode.
func (s *Server) Serve(lis net.Listener) error {
	if s.grpc == nil {
		return errors.New("the plugin mode serves no CRI")
	}
	return s.grpc.Serve(lis)
}

// Shutdown stops accepting connections and calls, ends the streams (with
// Unavailable: their clients subscribe again to the next shim), lets the
// unary calls in flight finish until ctx is done, then closes every
// connection, which cancels the calls left (and their backend calls). It
// returns by ctx's deadline even when a client has stopped reading: it does
// not wait for handlers that closing the connections has cancelled.
func (s *Server) Shutdown(ctx context.Context) {
	s.stop() // ends the streams, the reconciler's loop and the NRI connection
	if s.grpc != nil {
		s.stopGRPC(ctx)
	}
	// the side queue, the event reader, the NRI connection and the
	// reconciler's loop end with life, each after the call it makes
	// (bounded by its own timeout)
	ended := make(chan struct{})
	go func() {
		s.bg.wait()
		close(ended)
	}()
	select {
	case <-ended:
	case <-ctx.Done():
		s.log.Warn("shutdown: a check after an answer is still running at the deadline")
	}
}

// stopGRPC lets the calls in flight finish until ctx is done, then closes
// every connection.
func (s *Server) stopGRPC(ctx context.Context) {
	drained := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		close(drained)
	}()
	select {
	case <-drained:
	case <-ctx.Done():
		s.log.Warn("shutdown: calls still in flight at the deadline; closing their connections")
		s.grpc.Stop()
	}
}

// PinCounts counts the namespaces pinned on disk, by kind ("pid", "ipc"):
// what the shim holds, including pins made before a restart.
func (s *Server) PinCounts() (map[string]int, error) {
	ids, err := s.target.pins.IDs()
	if err != nil {
		return nil, err
	}
	n := map[string]int{string(namespaces.PID): 0, string(namespaces.IPC): 0}
	for _, id := range ids {
		for _, kind := range []namespaces.Kind{namespaces.PID, namespaces.IPC} {
			if _, ok := s.target.pins.Path(id, kind); ok {
				n[string(kind)]++
			}
		}
	}
	return n, nil
}
