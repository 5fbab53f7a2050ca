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
// plain values (a request's plan, the target as prepared, a decision, a
// view of the spec) with the kernel's checks and the pins injected, because
// it shares the decision, the reasons and the coded errors with the hooks;
// it is tested without a server (target_decide_test.go).
//
// Where things are, in the order a TARGET create goes through them, each
// once (from the request's bytes to the answer; on the NRI path the
// answer's own steps, decide to render, run inside containerd's create):
//
//	container_create.go  createContainer, the hook: the request read off the
//	                   wire with its forwarded forms (one criwire step, the
//	                   NRI token drawn before it), planned, and handed to
//	                   createTargeted, or forwarded as it came
//	target_plan.go     plan: what a request asks for (planFor), validated
//	target_create.go   createTargeted, the targeted create top to bottom:
//	                   prepare, record the intent, create through the path
//	                   chosen, keep the pins the container joins, report;
//	                   each resource with one owner and one deferred undo.
//	                   createVia runs the tries, each through its path
//	                   (createThrough): createViaNRI (the forward with the
//	                   token, the answer settled; a conflict or the
//	                   runtime's refusal of NRI is tried again) and
//	                   createViaUpdate (the forward as without NRI; the spec
//	                   pointed through containerd's API, pointSpec)
//	target_path.go     the path of a try (path: NRI, Update, refuse), chosen
//	                   before its forward (choosePath; pathFor, pure): NRI
//	                   when the answer is registered, else from the decision
//	nri_answer.go      the NRI answer (nriAnswer): registered by the NRI
//	                   path (expect), run inside containerd's create; its
//	                   decide-and-render (answerNRI) is the plugin mode's too
//	target_prepare.go  the resolved target (target) and its preparation:
//	                   the target found with its pid (one call to
//	                   containerd's API for a full id), the namespaces opened
//	                   through a pidfd, the pid confirmed; opened by prepare,
//	                   closed by the create
//	reconcile.go       crash recovery: the intent record of a create in
//	                   flight (begin, flight: forwarded, made, end),
//	                   reconcile, stale pins
//	target_decide.go   the decision (decision): one per create (decider:
//	                   made once, by whoever asks first, from what is
//	                   decided before the container exists, decisionFor, and
//	                   strict mode's refusal; after a conflict, the try's,
//	                   its namespaces falling back), and each container
//	                   tried decided from a copy of it (decideContainer: the
//	                   pid's confirmation, decide, strict mode's refusal; the
//	                   NRI answer's, the Update path's and the plugin mode's);
//	                   decide is what joins, the pins taken in one step
//	                   through what it is handed, the ipc /dev/shm; no I/O
//	                   but the kernel's checks and the pins, both injected
//	target_pins.go     the pins one create takes (createPins): take, keep
//	                   (the container answered with joins them), and the
//	                   one undo, release
//	target_render.go   a decision as spec options, or as an NRI adjustment
//	report.go          the log lines, the targeting metric, the Events
//
// After the answers, away from any call (side channels: bounded, never
// waited for), one component, afterAnswer, named for when it runs: its
// parts share one queue, the record owner and the reporter, and are told
// of the same containers by the hooks (afterHooks: created, started,
// removed) and by containerd's events (it is their taskHandler). It is
// built from narrow interfaces and values (afterDeps), holds nothing of
// the targeter's, and the targeter holds only its handle:
//
//	after_answer.go    afterAnswer: what it is built on (afterDeps), what it
//	                   owns, the hooks' handle and the events' handler
//	side.go            its side queue: one goroutine, a bounded queue, drops
//	                   counted by channel
//	containerd_events.go  containerd's task events (create, exit) from its
//	                   event service, resubscribed after each failure
//	target_verify.go   the check after a start (verifier): the container's
//	                   init read through a pidfd at its task's creation (or
//	                   after the start), confirmed with containerd, compared
//	                   with the pins; judge is pure, and fails closed
//	target_exit.go     the exit watch (exitWatch): the debuggers a target's
//	                   exit took with it (TargetExited)
//	after_catchup.go   the catch-up (catchUp, scan): what was missed while
//	                   containerd's events were not read
//
// and apart from it, told by its check of a runtime handler seen not
// joining (handlerLearner), the targeter's:
//
//	runtime_handlers.go  the pods' runtime handlers (RunPodSandbox,
//	                   sandbox_run.go; rebuilt from the backend) and which
//	                   cannot join namespace paths: configured, containerd's
//	                   runtime type, or seen by the check; resolve asks it
//	                   (cannotJoin) before it opens anything
//
// The plugin mode (mode = "plugin": no CRI socket, containerd's own CRI
// serves the kubelet) answers containerd's NRI events with the same steps:
//
//	plugin_mode.go     pluginMode, nriplugin's Watcher: a create whose PID
//	                   namespace is another process's /proc/<pid>/ns/pid
//	                   planned with that pid's container as target, prepared,
//	                   decided (the proxy's decider) and rendered by answerNRI; PostStartContainer
//	                   queues the check, RemoveContainer releases the pins,
//	                   Synchronize releases those of containers gone
//	plugin_pids.go     procs: which running container of a pod has a pid
//	                   (NRI's word, else containerd's), a candidate that the
//	                   preparation confirms
//
// and besides:
//
//	server.go          the Server built once from one deps value, every
//	                   field in one literal, starting nothing (New,
//	                   newServer); Run, which starts it in a stated order;
//	                   options and bounds, method registration, Serve,
//	                   Shutdown; the server's lifetime
//	passthrough.go     raw forwarding of unary calls, and of streams with one
//	                   forwarder per direction (grpc-proxy's pattern)
//	codec.go           the raw codec: messages stay bytes in grpc's buffers
//	lenient.go         the shim's own typed calls: answers decode whatever labels they carry
//	instrument.go      the boundary every call passes: status, panics, metrics, logs
//	health.go          grpc.health.v1 on the CRI socket
//	goroutines.go      the server's goroutines, which Shutdown waits for
//	socket.go          the CRI socket: stale socket, mode, group
//	targeter.go        the targeter: the hooks' dependencies, small
//	                   interfaces, and its handle on afterAnswer
//	container_start.go, container_remove.go, sandbox_remove.go, sandbox_run.go
//	                   the other hooks
//	nri.go             the paths (ViaNRI, ViaUpdate), the NRI boundary (nriAdapter), the plugin (newNRI)
//	records.go         records, the one owner of the containers' records:
//	                   every read and write, one at a time per container
//	containerd.go      containerd's own API: a CRI container with its task's
//	                   pid, task pids, stored specs
//	failpoint*.go      crash points for the crash tests (build tag failpoints)
//	errors.go, reasons.go  coded errors and the mappings to codes (codeOf),
//	                   fallback reasons
//
// Built, then run. New (newServer) builds everything and starts nothing:
// no goroutine but grpc's own stream workers, no subscription, no NRI
// connection, no pin released. Run starts the server, once, each step after
// the one before has returned: (1) in the plugin mode, the release of the
// pins an earlier plugin process left (releaseEarlier); (2) the start-up
// reconcile (Reconcile), bounded by Run's context, then retried by the
// reconciler's loop if it failed; (3) the side queue's goroutine; (4) the
// reader of containerd's events, whose first subscription schedules the
// catch-up: it never scans before the start-up reconcile
// (TestRunReconcilesBeforeTheCatchUp); (5) the NRI connection (Watch, then
// Run), or NRI turned off when the plugin mode's pins are unnamed.
// cmd/cri-nstarget runs, then serves.
//
// Who owns what. Server.life is the server's lifetime: Shutdown ends it,
// and with it the proxy's streams, the reconciler's loop, the NRI
// connection, the side queue's goroutine and the reader of containerd's
// events, each handed it; Server.bg (goroutines.go) runs the last four,
// and Shutdown waits for them all (a goroutine left after it is a test
// failure: TestShutdownLeavesNoGoroutine). A container's
// record (its annotation in the spec containerd stores) has one owner,
// records (records.go), built by newServer and handed to the targeter and
// to afterAnswer as the same value: the create's, the start's, the
// check's and the exit's writes all go through its update function, one at
// a time per container, and a read through it sees the last write. What
// happens after the answers is afterAnswer's (after_answer.go): it owns
// the side queue (built by it; its goroutine started by Run, step 3), the
// verifier's reads (taken by their check, or dropped after readTTL) and
// the exit watch's maps (who joined which target, their exits); the
// catch-up owns nothing but what it reads, and writes records only through
// the exit watch and the check. None of them holds the targeter: the
// hooks tell afterAnswer of a create, a start and a removal through
// afterHooks, and containerd's reader hands it its events. A create's
// state has one writer at a time,
// each for its lifetime: the preparation writes the target once, before it
// is done, and everyone after only reads it; the create's decision (decider)
// is written once, by whoever asks first, and after a conflict by the
// handler, between tries; each try's copy of it and the pins are the
// create's handler's, except while its NRI event is being answered
// (nriAnswer.adjust, on the NRI stub's goroutine), which writes its own
// decision into its nriAnswer and takes pins into the create's createPins;
// nriplugin's Settle hands both back only once that answer is done. The
// registration is settled by a deferred Settle too, so that a panic in the
// forward leaves nothing registered. Strict refusals are reported once, by
// the create that returns them.
//
// Errors are wrapped with context inside and turned into a gRPC status once,
// in instrument (instrument.go); statuses from the backend pass through
// unchanged.
//
// Locks, and what each guards (each is also said on its struct):
//
//	reconciler.mu       one reconcile at a time (reconcile.go), across its backend calls; taken before flights.mu
//	flights.mu          the ids in flight (records, pins) (a leaf)
//	records.mu          whose turn each container's record is (a leaf); a
//	                    turn is held across containerd's Get and Update of
//	                    that one container and the update function between,
//	                    which never reads or writes a record itself
//	verifier.mu         the reads at tasks' creation, until their check (a leaf; afterAnswer's)
//	exitWatch.mu        who joined which target, and their exits (a leaf; afterAnswer's)
//	handlers.mu         the pods' runtime handlers and what is known of each (a leaf)
//	procs.mu            the plugin mode's running containers and their pids (a leaf)
//	sideQueue.mu        when each channel's drops were last logged (a leaf; afterAnswer's)
//	nriplugin's locks   its own (a leaf each; see its doc.go)
//
// No lock is held across a call to the backend but reconciler.mu, which
// undoRecorded holds across ListContainers and RemoveContainer so that one
// reconcile runs at a time: only reconciles take it (start-up's and the
// reconciler's loop), never a call's handler, so no call waits on it.
// Besides these, what calls share is grpc's connections, the health server,
// the pins on disk and containerd's state.
package server
