package nriplugin

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/containerd/nri/pkg/api"
	"github.com/containerd/nri/pkg/stub"
	"github.com/sirupsen/logrus"
	"golang.org/x/mod/semver"
)

// AnnotationRequest correlates a forwarded TARGET CreateContainer with the
// NRI CreateContainer event containerd sends for the container it makes:
// the value is a random token the shim gave that one request (NewToken).
const AnnotationRequest = "io.cri-nstarget.request"

// MinVersion is the first NRI version whose adjustments carry Linux
// namespaces (api.ContainerAdjustment.AddOrReplaceNamespace).
const MinVersion = "v0.10.0"

// PluginName and pluginIndex register the shim with containerd's NRI:
// the index orders plugins (lower first).
const (
	PluginName  = "cri-nstarget"
	pluginIndex = "50"
)

// retry is how long the plugin waits before connecting again after the
// connection failed or was lost (containerd restarts close it).
const retry = time.Second

// retryTooOld is how long it waits before registering again with a runtime
// whose NRI cannot adjust namespaces (containerd 2.0 and 2.1): that changes
// only with a new containerd binary, and each registration takes
// containerd's plugin-sync lock for writing and lists every pod and
// container to the plugin. Meanwhile the Update path targets.
const retryTooOld = time.Minute

// Plugin is the shim as an NRI plugin: it holds the TARGET creates in
// flight that expect an event (calls), and the connection's state.
type Plugin struct {
	socket string
	log    *logrus.Entry
	// onChange is told whether NRI is usable now, and why, at each change.
	onChange func(usable bool, why string)

	// mu guards calls, usable, gen, why, refused, pending, synced, and each call's
	// state, gen and err; a leaf: nothing else is locked while it is held
	// (the gate's lock is taken without it). The rest is set by New and
	// never changes, or guards itself (tried, gate).
	mu     sync.Mutex
	calls  map[string]*Call // by token
	usable bool             // connected to an NRI that adjusts namespaces
	gen    uint64           // changes with every connection made or lost
	why    string           // why not usable, for the log and config check
	// refused is set when the runtime refused a namespace adjustment (NRI's
	// validator, by configuration): NRI stays unused until reconnected.
	refused bool
	// pending, in the plugin mode, are the containers whose create the
	// watcher answered with a namespace adjustment, until containerd
	// started, stopped or removed them; reset at each connection.
	pending map[string]bool
	// tried is closed once the first connection attempt has an outcome.
	tried     chan struct{}
	triedOnce sync.Once
	// gate keeps registrations and forwarded RemovePodSandbox calls apart;
	// synced (under mu) ends the registration in progress (Synchronize came).
	gate   registrationGate
	synced func()
	// watcher, in the plugin mode, is told of every container (Watch);
	// set before Run, then only read. nil: the proxy's plugin.
	watcher Watcher
}

// Call is one TARGET create that expects its NRI event.
type Call struct {
	// Sandbox is the pod sandbox id the request gave, in full or as a
	// unique prefix (as containerd takes it): the event's, in full, starts
	// with it.
	Sandbox string
	Name    string // the container's CRI name
	// Adjust answers the event, on the NRI stub's goroutine; it runs at
	// most once, and Settle waits for it to return.
	Adjust func(c *api.Container) (*api.ContainerAdjustment, error)

	state callState
	gen   uint64        // the connection that answered
	err   error         // what adjust answered with, if it refused
	done  chan struct{} // closed once answered (or expired)
}

type callState int

const (
	callWaiting  callState = iota // no event yet
	callClaimed                   // the event came: adjust runs
	callAnswered                  // adjust returned
	callExpired                   // the create finished without the event
)

// New is a plugin for containerd's NRI socket; it connects once Run runs.
// onChange (nil: none) is told of each change of usability.
func New(socket string, log *logrus.Entry, onChange func(usable bool, why string)) *Plugin {
	return &Plugin{socket: socket, log: log.WithField("nri", socket), onChange: onChange,
		calls: map[string]*Call{}, why: "not connected yet", tried: make(chan struct{})}
}

// Tried is closed once the first connection attempt has an outcome.
func (p *Plugin) Tried() <-chan struct{} { return p.tried }

// Off keeps the plugin from connecting, for good, and says why (Usable,
// and the first attempt's outcome: Tried is closed): Run is not called.
func (p *Plugin) Off(why string) { p.set(false, why) }

// Run keeps the plugin connected to containerd's NRI until ctx ends: it
// connects, waits for the connection to go, and connects again.
func (p *Plugin) Run(ctx context.Context) {
	for ctx.Err() == nil {
		wait := p.connection(ctx)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
	}
}

// connection registers the plugin with the runtime once and holds the
// connection until it is lost or ctx ends; it returns how long to wait
// before the next registration: retry, or retryTooOld when the runtime's
// NRI cannot adjust namespaces.
func (p *Plugin) connection(ctx context.Context) time.Duration {
	waited := time.Now()
	registered, err := p.gate.registration(ctx)
	if err != nil {
		return 0
	}
	if d := time.Since(waited); d > time.Millisecond {
		p.log.WithField("waited", d.Round(time.Millisecond)).Debug("NRI registration waited for RemovePodSandbox calls in the backend")
	}
	synced := make(chan struct{})
	var syncOnce sync.Once
	p.mu.Lock()
	p.synced = func() { registered(); syncOnce.Do(func() { close(synced) }) }
	p.mu.Unlock()
	closed := make(chan struct{})
	var once sync.Once
	st, err := stub.New(p.stubPlugin(), stub.WithPluginName(PluginName), stub.WithPluginIdx(pluginIndex),
		stub.WithSocketPath(p.socket), stub.WithLogger(stubLogger{p.log}),
		stub.WithOnClose(func() { once.Do(func() { close(closed); registered() }) }))
	if err == nil {
		err = st.Start(ctx)
	}
	if err != nil {
		registered()
		p.set(false, fmt.Sprintf("NRI socket %s: %v", p.socket, err))
		return retry
	}
	v := st.RuntimeNRIVersion()
	if ok, why := adjustsNamespaces(v); !ok {
		// containerd asks for its plugin-sync lock for writing once it has
		// configured the plugin: the registration ends, for the gate, when
		// it has synchronized the plugin (or the connection is gone).
		select {
		case <-synced:
		case <-closed:
		case <-ctx.Done():
		}
		st.Stop()
		registered()
		p.set(false, why)
		return retryTooOld
	}
	p.set(true, fmt.Sprintf("connected to NRI %s at %s", v, p.socket))
	select {
	case <-closed:
		p.set(false, "the NRI connection was lost")
	case <-ctx.Done():
		st.Stop()
		registered()
		p.set(false, "shutting down")
	}
	return retry
}

// adjustsNamespaces tells whether a runtime of NRI version v (as the
// runtime sent it, or as NRI's stub inferred it from the runtime's own
// version: containerd 2.0 and 2.1 send none, and are v0.8) can adjust
// Linux namespaces, and if not, why.
func adjustsNamespaces(v string) (bool, string) {
	if !semver.IsValid(v) || semver.Compare(v, MinVersion) < 0 {
		return false, fmt.Sprintf("the runtime's NRI version %q cannot adjust namespaces (needs %s)", v, MinVersion)
	}
	return true, ""
}

// Synchronize is the runtime's first request once it has configured the
// plugin. containerd sends it holding its plugin-sync lock for writing: no
// RemovePodSandbox is inside containerd any more, and those that arrive now
// wait for the lock at their first read. The registration is over as far as
// the gate is concerned.
func (p *Plugin) Synchronize(context.Context, []*api.PodSandbox, []*api.Container) ([]*api.ContainerUpdate, error) {
	p.mu.Lock()
	synced := p.synced
	p.mu.Unlock()
	if synced != nil {
		synced()
	}
	return nil, nil
}

// Removal counts a RemovePodSandbox into the backend once no registration
// is in progress (registrationGate); done counts it out.
func (p *Plugin) Removal(ctx context.Context) (done func(), err error) {
	waited := time.Now()
	done, err = p.gate.removal(ctx)
	if err != nil {
		return nil, fmt.Errorf("wait for the shim's NRI registration to finish: %w", err)
	}
	if d := time.Since(waited); d > time.Millisecond {
		p.log.WithField("waited", d.Round(time.Millisecond)).Debug("RemovePodSandbox waited for the NRI registration")
	}
	return done, nil
}

// set records the connection's state and reports a change of path.
func (p *Plugin) set(usable bool, why string) {
	p.mu.Lock()
	changed := usable != p.usable || p.gen == 0
	p.usable, p.why = usable, why
	p.gen++
	if usable {
		p.refused = false
		p.pending = nil
	}
	p.mu.Unlock()
	if changed {
		p.report()
	}
	p.triedOnce.Do(func() { close(p.tried) })
}

func (p *Plugin) report() {
	usable, why := p.Usable()
	if p.onChange != nil {
		p.onChange(usable, why)
	}
}

// Usable says whether creates can be targeted through NRI now, and why
// (not).
func (p *Plugin) Usable() (bool, string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.usable && !p.refused, p.why
}

// Refuse stops using NRI until the next connection: the runtime refused a
// namespace adjustment (NRI's default validator, reject_namespace_adjustment).
func (p *Plugin) Refuse(err error) {
	p.mu.Lock()
	p.refused = true
	p.why = fmt.Sprintf("the runtime refused a namespace adjustment: %v", err)
	p.mu.Unlock()
	p.report()
}

// Expect registers a create that will be forwarded with token in its
// annotations; the answer to its event will come from c.Adjust. It returns
// false when NRI is not usable now.
func (p *Plugin) Expect(token string, c *Call) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.usable || p.refused {
		return false
	}
	c.state, c.done = callWaiting, make(chan struct{})
	p.calls[token] = c
	return true
}

// Settle ends the wait for token's event once the backend answered the
// create. It reports whether the event was answered on a connection that
// is still up (so containerd applied the adjustment): a call whose event
// never came, or came on a connection lost since, is not.
//
// A call whose event is being answered (claimed) is waited for until its
// answer is done, past ctx: the answer (Adjust) may write what the create
// owns, and once Settle returns the create does, so what they share has one
// owner at a time. ctx only bounds how long Settle logs nothing; an Adjust
// must itself end (the shim's ends with the create's late steps).
func (p *Plugin) Settle(ctx context.Context, token string) (answered bool, err error) {
	p.mu.Lock()
	c := p.calls[token]
	if c == nil {
		p.mu.Unlock()
		return false, nil
	}
	if c.state == callWaiting {
		c.state = callExpired
		close(c.done)
	}
	p.mu.Unlock()
	select {
	case <-c.done:
	case <-ctx.Done():
		p.log.WithField("token", token).Warn("the create's context ended while its NRI event is being answered; waiting for the answer")
		<-c.done
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.calls, token)
	return c.state == callAnswered && c.gen == p.gen && p.usable, c.err
}

// CreateContainer is the NRI event: containerd is making container c. Only
// a container whose request the shim forwarded with a token it expects is
// adjusted, and only if it is that request's (same name, in the sandbox
// the request named); any other is left alone.
func (p *Plugin) CreateContainer(ctx context.Context, pod *api.PodSandbox, c *api.Container) (*api.ContainerAdjustment, []*api.ContainerUpdate, error) {
	token, ok := c.GetAnnotations()[AnnotationRequest]
	if !ok {
		return nil, nil, nil
	}
	p.mu.Lock()
	call := p.calls[token]
	if call == nil || call.state != callWaiting || !call.names(c) {
		p.mu.Unlock()
		p.log.WithFields(logrus.Fields{"container": c.GetId(), "name": c.GetName(), "sandbox": c.GetPodSandboxId()}).
			Warn("NRI event for a container whose request is not in flight (or not this one): not adjusted")
		return nil, nil, nil
	}
	call.state = callClaimed
	gen := p.gen
	p.mu.Unlock()

	adj, err := call.Adjust(c)

	p.mu.Lock()
	call.state, call.gen, call.err = callAnswered, gen, err
	close(call.done)
	p.mu.Unlock()
	return adj, nil, err
}

// names tells whether c is the container the call's request names.
func (c *Call) names(ctr *api.Container) bool {
	return c.Sandbox != "" && strings.HasPrefix(ctr.GetPodSandboxId(), c.Sandbox) && c.Name == ctr.GetName()
}

// NewToken is a request's correlation token: 128 random bits.
func NewToken() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// IsNamespaceRefusal tells whether a CreateContainer error is the runtime's
// NRI validator refusing a namespace adjustment (configuration, not this
// request): NRI's default validator says "attempted restricted namespace
// adjustment".
func IsNamespaceRefusal(err error) bool {
	return err != nil && strings.Contains(err.Error(), "namespace adjustment")
}

// IsNamespaceConflict tells whether a CreateContainer error is NRI refusing
// two plugins' adjustments of the same namespace ("plugins "A" and "B"
// both tried to set Namespace pid", NRI v0.12) where one of them is the shim.
func IsNamespaceConflict(err error) bool {
	if err == nil {
		return false
	}
	msg := strings.ToLower(err.Error())
	return strings.Contains(msg, "both tried to set") && strings.Contains(msg, "namespace") && strings.Contains(msg, PluginName)
}

// stubLogger sends the NRI stub's log to the shim's.
type stubLogger struct{ log *logrus.Entry }

func (l stubLogger) Debugf(_ context.Context, format string, args ...any) {
	l.log.Debugf(format, args...)
}
func (l stubLogger) Infof(_ context.Context, format string, args ...any) {
	l.log.Debugf(format, args...) // the stub is chatty at info
}
func (l stubLogger) Warnf(_ context.Context, format string, args ...any) {
	l.log.Warnf(format, args...)
}
func (l stubLogger) Errorf(_ context.Context, format string, args ...any) {
	l.log.Errorf(format, args...)
}
