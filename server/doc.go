// Package server is cri-nstarget's gRPC side: a CRI v1 proxy that serves
// kubelet with one grpc.Server and forwards every RuntimeService and
// ImageService call to a backend as raw frames, intercepting CreateContainer
// (rewriting NamespaceMode TARGET), StartContainer (checking pinned
// namespaces), RemoveContainer and RemovePodSandbox (releasing pins).
//
// The layout follows state and lifetime, as containerd keeps a large CRI
// server in one package and moves out only what lives on its own. What has
// state or a lifetime apart from a call is a package of its own: the NRI
// connection and its table of creates awaiting their event (nriplugin), the
// pins on disk (pins, mechanism beside package namespaces), the intent
// records (intents). The targeting policy stays here, as functions over
// plain values (a request's plan, an outcome, a view of the spec), because
// it shares the outcome, the reasons and the coded errors with the hooks,
// and it is tested without a server: on an outcome and a fake pin store.
//
// Where things are:
//
//	server.go          the grpc.Server: options and bounds, method registration, Serve, Shutdown
//	passthrough.go     raw forwarding of unary calls and streams (grpc-proxy's pattern)
//	codec.go           the raw codec: messages stay bytes in grpc's buffers
//	lenient.go         the shim's own typed calls: answers decode whatever labels they carry
//	instrument.go      the boundary every call passes: status, panics, metrics, logs
//	health.go          grpc.health.v1 on the CRI socket
//	socket.go          the CRI socket: stale socket, mode, group
//	container_create.go  the create, top to bottom: prepare, record the intent,
//	                   forward (the NRI retry apart), point (NRI answer or spec
//	                   Update), report; each undo deferred after what it undoes
//	container_start.go, container_remove.go, sandbox_remove.go  the other hooks
//	target_plan.go     plan: what a request asks for (planFor), validated
//	target.go          the targeter, its dependencies, and resolve: the target,
//	                   its pid, its namespaces opened (prepare)
//	target_decide.go   decide: the outcome, the one tail both paths share (pin or
//	                   fall back, strict refusal, release), the ipc /dev/shm
//	target_render.go   render: the decision as spec options, or as an NRI adjustment
//	nri.go             the paths (ViaNRI, ViaUpdate), the NRI boundary (nriAdapter), wiring
//	reconcile.go       crash recovery: intent records in flight, discard, reconcile,
//	                   stale pins
//	report.go          the log lines and the targeting metric
//	containerd.go      containerd's own API: task pids, stored specs
//	failpoint*.go      crash points for the crash tests (build tag failpoints)
//	errors.go, reasons.go  coded errors, fallback reasons
//
// Errors are wrapped with context inside and turned into a gRPC status once,
// in instrument (instrument.go); statuses from the backend pass through
// unchanged.
//
// Locks, and what each guards (each is also said on its struct):
//
//	reconciler.mu       one reconcile at a time (reconcile.go); taken before flights.mu
//	flights.mu          the ids of creates in flight, and the reconciler loop (a leaf)
//	nriplugin's locks   its own (a leaf each; see its doc.go)
//
// No lock is held across a call to the backend. A create's outcome has one
// owner at a time: the create's handler, except while its NRI event is
// being answered (answerNRI, on the NRI stub's goroutine); nriplugin's
// Settle hands it back only once that answer is done. Besides these, what
// calls share is grpc's connections, the health server, the pins on disk
// and containerd's state.
package server
