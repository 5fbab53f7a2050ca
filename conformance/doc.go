// Package conformance is a suite for NamespaceMode TARGET (kubectl debug
// --target) that runs against any CRI v1 endpoint given by flags, directly
// against a runtime or through a proxy such as cri-nstarget.
//
// It checks behaviour from inside containers: which processes a debug
// container sees and which /proc/self/ns links it has, compared with the
// target's and the pod's. Where the CRI contract leaves a choice (a target
// that exited, an unknown NamespaceMode), a case accepts any of a stated set
// of behaviours, reports which one it saw, and fails a runtime that puts a
// container in a namespace that is neither the target's nor the pod's.
//
// The suite is the package's tests; it imports only cri-api, gRPC and the
// standard library, so it can be built once and pointed anywhere. It ships
// as the program nstarget-conformance (make release: its tarball and the
// package cri-nstarget-conformance; docs/qualify.md), a static test binary
// built as critest is (make conformance-suite), and CI runs that same build:
//
//	make conformance-suite    # bin/nstarget-conformance
//	bin/nstarget-conformance --runtime-endpoint unix:///run/containerd/containerd.sock \
//	    --test-image IMAGE --report report.json -test.v
//
// --help says how to point it at a runtime, --list lists the cases, --cases
// selects some.
//
// The test image must have sh, ps (listing every process with
// `ps -o pid,args`), readlink, sleep, unshare and cat, as busybox does.
// Without --runtime-endpoint the suite skips, so `go test ./...` needs no
// daemon.
//
// The userns/* cases run a pod with hostUsers: false (userns_options, mode
// POD, on the pod and on every container). They skip, with the reason, when
// the runtime's CRI Status reports no user-namespace support for its
// default handler; --require-userns makes that a failure.
package conformance
