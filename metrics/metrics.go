package metrics

import (
	"context"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/events"
)

const namespace = "cri_nstarget"

// numCodes is the number of gRPC codes (OK through Unauthenticated).
const numCodes = int(codes.Unauthenticated) + 1

// unknownMethod labels calls of methods this build's cri-api does not know.
const unknownMethod = "unknown"

// Recorder holds the shim's metrics. Its Call is on every CRI call's path:
// it looks the method up in a map built once, observes a histogram child
// fetched once, and increments a counter child fetched on the first call
// with that code, so it allocates nothing after warm-up.
type Recorder struct {
	reg       *prometheus.Registry
	own       prometheus.Registerer // reg, with the label mode on each of the shim's own metrics
	requests  *prometheus.CounterVec
	duration  *prometheus.HistogramVec
	targeting *prometheus.CounterVec
	path      *prometheus.GaugeVec
	events    *prometheus.CounterVec
	dropped   *prometheus.CounterVec
	methods   map[string]*series // by full method name; read-only after New
	unknown   *series
}

// series are the children of one method.
type series struct {
	label    string
	duration prometheus.Observer
	requests [numCodes]atomic.Pointer[counter]
}

type counter struct{ prometheus.Counter }

// New makes a Recorder with its own registry, holding the shim's metrics,
// the Go runtime's and the process's, and cri_nstarget_build_info. Each of
// the shim's own carries the label mode: "proxy" or "plugin" (mode; ""
// is "proxy").
func New(version, mode string) *Recorder {
	if mode == "" {
		mode = "proxy"
	}
	reg := prometheus.NewRegistry()
	r := &Recorder{
		reg: reg,
		own: prometheus.WrapRegistererWith(prometheus.Labels{"mode": mode}, reg),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "requests_total",
			Help: "CRI calls served, by method (short name) and gRPC status code.",
		}, []string{"method", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: namespace, Name: "request_duration_seconds",
			Help:    "Time to serve a CRI call, backend included, by method (short name).",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120},
		}, []string{"method"}),
		targeting: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "targeting_total",
			Help: "NamespaceMode TARGET decisions, one per namespace: result targeted, fallback or refused (strict) at stage create or start; " +
				"at stage verify, what was seen once the container had started: joined, not_joined, unverified, or refused (strict mode stopped it); and why (none when targeted or joined).",
		}, []string{"namespace", "stage", "result", "reason"}),
		path: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: namespace, Name: "targeting_path",
			Help: "How targeted containers' specs are written now: 1 for the path in use, nri (in containerd's CreateContainer, " +
				"through NRI) or update (through containerd's API afterwards), 0 for the other.",
		}, []string{"path"}),
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "events_total",
			Help: "Events on pods saying whether a container joined its target: result sent (reason none) or dropped, " +
				"and why (queue_full, shutdown, no_kubeconfig, bad_kubeconfig, pod_not_found, unauthorized, forbidden, rejected, unreachable).",
		}, []string{"result", "reason"}),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: namespace, Name: "dropped_total",
			Help: "Checks after an answer dropped because the side queue was full, by channel: verify (whether a started container joined its target), " +
				"exit (a target's exit, and the debuggers that died with it), scan (what was missed while containerd's events were not read).",
		}, []string{"channel"}),
		methods: map[string]*series{},
	}
	r.series()
	build := prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: namespace, Name: "build_info", Help: "Always 1; the labels say which build runs.",
	}, []string{"version", "goversion"})
	build.WithLabelValues(version, runtime.Version()).Set(1)
	r.own.MustRegister(r.requests, r.duration, r.targeting, r.path, r.events, r.dropped, build)
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return r
}

// series makes every series known from the start, at 0 (alerts on a
// rate see the first drop), and each CRI method's children.
func (r *Recorder) series() {
	for _, c := range SideChannels {
		r.dropped.WithLabelValues(c)
	}
	r.events.WithLabelValues(events.ResultSent, events.ReasonNone)
	for _, reason := range events.Reasons {
		r.events.WithLabelValues(events.ResultDropped, reason)
	}
	for _, sd := range []grpc.ServiceDesc{runtimeapi.RuntimeService_ServiceDesc, runtimeapi.ImageService_ServiceDesc} {
		for _, m := range sd.Methods {
			r.methods["/"+sd.ServiceName+"/"+m.MethodName] = r.newSeries(m.MethodName)
		}
		for _, m := range sd.Streams {
			r.methods["/"+sd.ServiceName+"/"+m.StreamName] = r.newSeries(m.StreamName)
		}
	}
	r.unknown = r.newSeries(unknownMethod)
}

func (r *Recorder) newSeries(label string) *series {
	return &series{label: label, duration: r.duration.WithLabelValues(label)}
}

// Call records one finished CRI call.
func (r *Recorder) Call(method string, code codes.Code, d time.Duration) {
	s, ok := r.methods[method]
	if !ok {
		s = r.unknown
	}
	s.duration.Observe(d.Seconds())
	if int(code) >= numCodes {
		code = codes.Unknown
	}
	c := s.requests[code].Load()
	if c == nil {
		c = &counter{r.requests.WithLabelValues(s.label, code.String())}
		s.requests[code].Store(c) // a racing Store holds the same child
	}
	c.Inc()
}

// Targeting records one targeting decision for one namespace.
func (r *Recorder) Targeting(namespace, stage, result, reason string) {
	r.targeting.WithLabelValues(namespace, stage, result, reason).Inc()
}

// Event counts one Event on a pod: sent, or dropped and why (package events).
func (r *Recorder) Event(result, reason string) {
	r.events.WithLabelValues(result, reason).Inc()
}

// SideChannels are the side queue's channels (server's), each counted from
// the start.
var SideChannels = []string{"verify", "exit", "scan", "log"}

// Dropped counts one check dropped from the side queue's channel.
func (r *Recorder) Dropped(channel string) {
	r.dropped.WithLabelValues(channel).Inc()
}

// TargetingPath shows via ("nri" or "update") as the path in use; any
// other ("none": the plugin mode not connected) shows neither.
func (r *Recorder) TargetingPath(via string) {
	for _, p := range []string{"nri", "update"} {
		v := 0.0
		if p == via {
			v = 1
		}
		r.path.WithLabelValues(p).Set(v)
	}
}

// WatchPins adds cri_nstarget_pins, the namespaces pinned on disk by kind,
// read by count at every scrape (so it is right across restarts).
func (r *Recorder) WatchPins(count func() (map[string]int, error)) {
	r.own.MustRegister(&countCollector{count: count, desc: prometheus.NewDesc(namespace+"_pins",
		"Namespaces pinned under the state dir for targeting containers, by namespace kind.", []string{"namespace"}, nil)})
}

// countCollector reports a gauge per label value, read at every scrape.
type countCollector struct {
	count func() (map[string]int, error)
	desc  *prometheus.Desc
}

func (c *countCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *countCollector) Collect(ch chan<- prometheus.Metric) {
	n, err := c.count()
	if err != nil {
		ch <- prometheus.NewInvalidMetric(c.desc, err)
		return
	}
	for kind, v := range n {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(v), kind)
	}
}

// Handler serves the registry in the Prometheus exposition formats. A
// collector that fails (the pin dir unreadable) is reported, the rest served.
func (r *Recorder) Handler() http.Handler {
	return promhttp.InstrumentMetricHandler(r.reg, promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
	}))
}

// Healthz answers 200 "ok" when check succeeds and 503 with the error
// otherwise; check bounds its own time (server.CheckBackend does).
func Healthz(check func(context.Context) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		if err := check(req.Context()); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			w.Write([]byte("unhealthy: " + err.Error() + "\n"))
			return
		}
		w.Write([]byte("ok\n"))
	})
}
