// Package metrics is cri-nstarget's Prometheus instrumentation: a Recorder
// that the server reports every CRI call and every targeting decision to
// (it implements server.Metrics), the /metrics handler over its own registry,
// and the /healthz handler.
//
// Every label value comes from a bounded set: CRI method names known to this
// build (anything else is "unknown"), gRPC codes, namespace kinds, stages,
// results and the server's fixed list of fallback reasons. No ids, no error
// text.
package metrics
