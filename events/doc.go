// Package events posts the shim's targeting outcomes as core/v1 Events on
// the pod, where operators look (`kubectl describe pod`, `kubectl events`),
// under the identity of a kubeconfig: by default the kubelet's own.
//
// It is a side channel, and never in a CRI call's way (docs/design.md,
// "Observability"):
//   - Post never blocks: an event goes into a bounded queue, or is dropped
//     and counted (queue_full).
//   - One sender posts them, paced by a token bucket, each with a bounded
//     number of attempts; what it cannot post is dropped and counted, with a
//     fixed set of reasons (Reasons), and logged once per reason and
//     interval, never once per event.
//   - Close lets the sender post what is queued until its context ends,
//     then drops the rest (shutdown).
//
// The apiserver is reached through client-go's REST client with core/v1's
// types only (not the clientset, which would link every API group): the
// kubeconfig loading, the TLS, and the reload of a rotated client
// certificate (kubelet-client-current.pem) are client-go's. The kubeconfig
// is read lazily, at the first event, and again whenever the file changes:
// the shim starts before the kubelet, which writes its kubeconfig later.
// A kubeconfig that needs an exec or auth-provider plugin is refused: the
// shim executes nothing.
//
// An event is posted only for a pod that exists with the uid its CRI
// client gave: the shim reads the pod first (the kubelet's identity may),
// so a pod that crictl or critest made, which no apiserver holds, gets no
// event anywhere (pod_not_found). The Event is shaped as the kubelet's own
// container events (pkg/kubelet/container/ref.go and client-go's
// tools/record): the pod as involvedObject with its uid, the container's
// fieldPath (spec.ephemeralContainers{name} for a debug container),
// source cri-nstarget on the node, count 1, first and last timestamp now.
package events
