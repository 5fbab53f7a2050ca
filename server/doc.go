// Package server is cri-nstarget's gRPC side: a CRI v1 proxy that forwards
// every RuntimeService and ImageService call to a backend as raw frames, and
// intercepts CreateContainer (rewriting NamespaceMode TARGET), StartContainer
// (checking pinned namespaces), RemoveContainer and RemovePodSandbox
// (releasing pins).
//
// Errors are wrapped with context inside and turned into a gRPC status once,
// in the instrumentation layer (instrument.go); statuses from the backend
// pass through unchanged.
package server
