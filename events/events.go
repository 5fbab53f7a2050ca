package events

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/time/rate"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// Event is what the shim has to say about one container of a pod.
type Event struct {
	Pod       Pod
	Container string // the container's name, never its id
	// Node: the Event is about the node the Sink posts for (Options.Node),
	// not about a pod; Pod and Container are unused.
	Node    bool
	Warning bool   // type Warning; else Normal
	Reason  string // CamelCase, as the kubelet's ("TargetingFallback")
	Message string // at most MaxMessage bytes of it are posted
}

// Pod is a pod as its CRI client named it (PodSandboxMetadata): the one
// the shim's records carry.
type Pod = oci.Pod

// MaxMessage bounds an Event's message, in bytes.
const MaxMessage = 1024

// Component is the Event's source and reporting controller.
const Component = "cri-nstarget"

// What became of an event, as cri_nstarget_events_total counts it: result
// sent (reason none) or dropped, with one of Reasons.
const (
	ResultSent    = "sent"
	ResultDropped = "dropped"
)

// Reasons an event is dropped for (and none, for those sent).
const (
	ReasonNone = "none"
	// The queue was full: events came faster than they could be posted.
	ReasonQueueFull = "queue_full"
	// The shim was stopping (and its shutdown_timeout ended).
	ReasonShutdown = "shutdown"
	// The kubeconfig does not exist (yet: the kubelet writes its own after
	// the shim has started).
	ReasonNoKubeconfig = "no_kubeconfig"
	// The kubeconfig could not be read or used: not a kubeconfig, no
	// current context, or one that needs a plugin to run.
	ReasonBadKubeconfig = "bad_kubeconfig"
	// The apiserver has no pod of that namespace, name and uid: a pod that
	// crictl or critest made, or one deleted since.
	ReasonPodNotFound = "pod_not_found"
	// The apiserver did not accept the credentials (401).
	ReasonUnauthorized = "unauthorized"
	// The identity may not read the pod or create the event (403).
	ReasonForbidden = "forbidden"
	// The apiserver refused the event for another reason (a 4xx).
	ReasonRejected = "rejected"
	// The apiserver did not answer, or failed, on every attempt.
	ReasonUnreachable = "unreachable"
)

// Reasons is every reason an event can be dropped for.
var Reasons = []string{ReasonQueueFull, ReasonShutdown, ReasonNoKubeconfig, ReasonBadKubeconfig,
	ReasonPodNotFound, ReasonUnauthorized, ReasonForbidden, ReasonRejected, ReasonUnreachable}

// Metrics counts what became of each event (package metrics implements it).
type Metrics interface {
	Event(result, reason string)
}

// Options configure a Sink. Zero bounds take their defaults.
type Options struct {
	// Kubeconfig is the file whose identity posts the events (the
	// kubelet's, /etc/kubernetes/kubelet.conf, by default). It is read at
	// the first event and again whenever it changes.
	Kubeconfig string
	UserAgent  string
	// Node is the node the Events come from (their source), and the one an
	// Event with Node is about; empty: the one its identity names (NodeOf).
	Node    string
	Log     *logrus.Entry
	Metrics Metrics // nil: none

	QueueSize int           // events waiting to be posted; 256
	QPS       float64       // events posted per second, sustained; 5
	Burst     int           // and in a burst; 25
	Backoff   time.Duration // before the second attempt, doubled for each next; 500ms
}

// Bounds no caller sets.
const (
	attempts       = 3                // per event, when the apiserver does not answer or fails
	requestTimeout = 10 * time.Second // per request
	logEvery       = 5 * time.Minute  // a drop reason is logged at most once per
)

func (o *Options) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.QueueSize, 256)
	def(&o.Burst, 25)
	if o.QPS <= 0 {
		o.QPS = 5
	}
	for _, d := range []struct {
		v *time.Duration
		d time.Duration
	}{{&o.Backoff, 500 * time.Millisecond}} {
		if *d.v <= 0 {
			*d.v = d.d
		}
	}
	if o.Log == nil {
		o.Log = logrus.NewEntry(logrus.StandardLogger())
	}
}

// Sink posts Events to the apiserver, one sender at a time, from a
// bounded queue; see the package's doc.
type Sink struct {
	opts  Options
	queue chan Event
	drops *dropLog

	// mu guards closed. Post holds it for reading while it queues, so that
	// once Close has set closed, nothing more is queued.
	mu     sync.RWMutex
	closed bool

	draining chan struct{} // closed by Close: post what is queued, then end
	ctx      context.Context
	cancel   context.CancelFunc // ends the sender's requests and waits
	done     chan struct{}      // closed when the sender has returned

	// Owned by the sender (run).
	limiter *rate.Limiter
	conn    *client // of the kubeconfig as last read; nil: none usable
	now     func() time.Time
}

// New starts a Sink's sender; Close stops it.
func New(opts Options) *Sink {
	opts.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sink{
		opts:     opts,
		queue:    make(chan Event, opts.QueueSize),
		drops:    &dropLog{every: logEvery, last: map[string]time.Time{}, since: map[string]int{}},
		draining: make(chan struct{}),
		ctx:      ctx,
		cancel:   cancel,
		done:     make(chan struct{}),
		limiter:  rate.NewLimiter(rate.Limit(opts.QPS), opts.Burst),
		now:      time.Now,
	}
	go s.run()
	return s
}

// Post queues e for the sender. It never blocks: with the queue full, or
// the Sink closed, e is dropped and counted.
func (s *Sink) Post(e Event) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		s.dropped(ReasonShutdown, e, nil)
		return
	}
	select {
	case s.queue <- e:
	default:
		s.dropped(ReasonQueueFull, e, nil)
	}
}

// Close stops taking events and lets the sender post those queued until
// ctx is done; then it cancels the request in flight, drops what is left
// (counted as shutdown) and returns. It never outlasts ctx by more than the
// time a cancelled request takes to return.
func (s *Sink) Close(ctx context.Context) {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.mu.Unlock()
	close(s.draining)
	select {
	case <-s.done:
	case <-ctx.Done():
	}
	s.cancel()
	<-s.done
	for {
		select {
		case e := <-s.queue:
			s.dropped(ReasonShutdown, e, nil)
		default:
			return
		}
	}
}

// run is the sender: it posts events in the order they were queued until
// Close, then what was queued before Close.
func (s *Sink) run() {
	defer close(s.done)
	for {
		select {
		case e := <-s.queue:
			s.deliver(e)
		case <-s.draining:
			// nothing is queued after draining: post what is left, then end
			for {
				select {
				case e := <-s.queue:
					s.deliver(e)
				default:
					return
				}
			}
		}
	}
}

// deliver posts e and counts what became of it.
func (s *Sink) deliver(e Event) {
	if s.ctx.Err() != nil {
		s.dropped(ReasonShutdown, e, nil)
		return
	}
	reason, err := s.send(s.ctx, e)
	if reason != ReasonNone {
		s.dropped(reason, e, err)
		return
	}
	s.count(ResultSent, ReasonNone)
	s.opts.Log.WithFields(logrus.Fields{"pod": e.Pod.Namespace + "/" + e.Pod.Name, "container": e.Container, "reason": e.Reason}).Debug("events: posted")
}

// send posts e, paced, in up to Attempts attempts while the apiserver does
// not answer or fails, and says why it could not (ReasonNone: posted).
func (s *Sink) send(ctx context.Context, e Event) (string, error) {
	if err := s.pace(ctx); err != nil {
		return ReasonShutdown, err
	}
	c, reason, err := s.client()
	if c == nil {
		return reason, err
	}
	backoff := s.opts.Backoff
	for attempt := 1; ; attempt++ {
		reason, err := c.post(ctx, e, s.now())
		switch {
		case reason == ReasonNone:
			return reason, nil
		case ctx.Err() != nil:
			return ReasonShutdown, err
		case reason != ReasonUnreachable || attempt >= attempts:
			return reason, err
		}
		if !sleep(ctx, backoff) {
			return ReasonShutdown, err
		}
		backoff *= 2
	}
}

// pace waits for the token bucket to let one more event through.
func (s *Sink) pace(ctx context.Context) error {
	d := s.reserve(s.now())
	if d <= 0 {
		return nil
	}
	if !sleep(ctx, d) {
		return ctx.Err()
	}
	return nil
}

// reserve takes a token from the bucket at now and says how long to wait
// before using it.
func (s *Sink) reserve(now time.Time) time.Duration {
	return s.limiter.ReserveN(now, 1).DelayFrom(now)
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// client is the client of the kubeconfig as it is on disk now: the one
// made before while the file has not changed, else a new one.
func (s *Sink) client() (*client, string, error) {
	fi, err := os.Stat(s.opts.Kubeconfig)
	if err != nil {
		s.conn = nil
		if errors.Is(err, fs.ErrNotExist) {
			return nil, ReasonNoKubeconfig, err
		}
		return nil, ReasonBadKubeconfig, err
	}
	st := stampOf(fi)
	if s.conn != nil && s.conn.stamp == st {
		return s.conn, "", nil
	}
	c, err := newClient(s.opts.Kubeconfig, s.opts.UserAgent, s.opts.Node, requestTimeout)
	if err != nil {
		s.conn = nil
		return nil, ReasonBadKubeconfig, err
	}
	c.stamp = st
	s.conn = c
	s.opts.Log.WithFields(logrus.Fields{"kubeconfig": s.opts.Kubeconfig, "server": c.server, "user": c.user, "node": c.node}).
		Info("events: posting targeting outcomes as Events on their pods")
	return c, "", nil
}

// stamp tells a file's versions apart: a kubeconfig written again in place,
// or replaced by a rename, has another.
type stamp struct {
	mtime    time.Time
	size     int64
	dev, ino uint64
}

func (s *Sink) count(result, reason string) {
	if s.opts.Metrics != nil {
		s.opts.Metrics.Event(result, reason)
	}
}

// dropped counts e as dropped for reason, and logs it if no drop for that
// reason was logged within LogEvery (with the number dropped since).
func (s *Sink) dropped(reason string, e Event, err error) {
	s.count(ResultDropped, reason)
	n, ok := s.drops.note(reason, time.Now())
	if !ok {
		return
	}
	entry := s.opts.Log.WithFields(logrus.Fields{"reason": reason, "pod": e.Pod.Namespace + "/" + e.Pod.Name, "container": e.Container,
		"dropped": n, "next_log_in": logEvery.String()})
	if err != nil {
		entry = entry.WithError(err)
	}
	level := logrus.WarnLevel
	if reason == ReasonPodNotFound || reason == ReasonShutdown {
		level = logrus.InfoLevel // expected: a pod that only a CRI client knows; a stop
	}
	entry.Log(level, "events: an event was not posted (cri_nstarget_events_total counts them)")
}

// dropLog says when a drop reason is due for a log line: the first drop of
// each reason, then at most one per interval, carrying how many were
// dropped since the last line.
type dropLog struct {
	mu    sync.Mutex
	every time.Duration
	last  map[string]time.Time
	since map[string]int
}

func (l *dropLog) note(reason string, now time.Time) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.since[reason]++
	if last, ok := l.last[reason]; ok && now.Sub(last) < l.every {
		return 0, false
	}
	n := l.since[reason]
	l.last[reason], l.since[reason] = now, 0
	return n, true
}
