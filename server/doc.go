// Package server is cri-nstarget's gRPC side: a CRI v1 proxy that serves
// kubelet with one grpc.Server and forwards every RuntimeService and
// ImageService call to a backend as raw frames, intercepting CreateContainer
// (rewriting NamespaceMode TARGET), StartContainer (checking pinned
// namespaces), RemoveContainer and RemovePodSandbox (releasing pins).
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
//	target.go          the targeting type: prepare, finish, checkPID, report, discard
//	target_validate.go what a CreateContainer asks for (plan), id validation; the
//	                   request itself is read and rewritten as wire bytes (criwire)
//	container_*.go, sandbox_remove.go  the intercepted methods' hooks
//	pins.go            namespace pins on disk
//	intents.go         records of creates in flight, for crash recovery
//	reconcile.go       start-up and periodic reconciling of those records and of stale pins
//	failpoint*.go      crash points for the crash tests (build tag failpoints)
//	containerd.go      containerd's own API: task pids, stored specs
//	nri.go             the shim as an NRI plugin: the create event's answer, the connection
//	nri_gate.go        NRI registrations kept apart from forwarded RemovePodSandbox calls
//	errors.go, reasons.go  coded errors, fallback reasons
//
// Errors are wrapped with context inside and turned into a gRPC status once,
// in instrument (instrument.go); statuses from the backend pass through
// unchanged.
//
// Locks, and what each guards (each is also said on its struct):
//
//	targeter.reconcileMu  one reconcile at a time (reconcile.go); taken before flights.mu
//	flights.mu            the ids of creates in flight (reconcile.go)
//	nriPlugin.mu          the NRI connection's state and its table of calls (nri.go)
//	registrationGate.mu   registrations against forwarded RemovePodSandbox calls (nri_gate.go)
//
// No lock is held across a call to the backend. A create's outcome has one
// owner at a time: the create's handler, except while its NRI event is
// being answered (adjust, on the NRI stub's goroutine); settle hands it
// back only once that answer is done (nri.go). Besides these, what calls
// share is grpc's connections, the health server, the pins on disk and
// containerd's state.
package server
