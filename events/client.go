package events

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// The resources the shim uses: it reads a pod's metadata, and creates
// Events (core/v1).
var (
	podsResource   = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	eventsResource = schema.GroupVersionResource{Version: "v1", Resource: "events"}
)

// client posts Events through one kubeconfig's identity.
type client struct {
	pods   metadata.Getter
	events dynamic.NamespaceableResourceInterface
	node   string // the Events' source host
	server string // for the log
	user   string
	stamp  stamp // of the kubeconfig it was made from
}

// nodeUserPrefix begins the user name of a kubelet's identity.
const nodeUserPrefix = "system:node:"

// Config reads the kubeconfig at path into a REST configuration, refusing
// one that needs a plugin to run: the shim executes nothing.
func Config(path string) (*rest.Config, error) {
	raw, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return nil, err
	}
	cfg, err := clientcmd.NewNonInteractiveClientConfig(*raw, raw.CurrentContext, &clientcmd.ConfigOverrides{}, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	switch {
	case cfg.ExecProvider != nil:
		return nil, fmt.Errorf("kubeconfig %s needs the exec plugin %q, and cri-nstarget executes nothing: give it a kubeconfig with a client certificate or a token (docs/operations.md)", path, cfg.ExecProvider.Command)
	case cfg.AuthProvider != nil:
		return nil, fmt.Errorf("kubeconfig %s needs the auth provider plugin %q, which cri-nstarget does not have: give it a kubeconfig with a client certificate or a token (docs/operations.md)", path, cfg.AuthProvider.Name)
	}
	cfg.QPS = -1 // no limiter of client-go's: the Sink paces
	return cfg, nil
}

// newClient makes a client of the kubeconfig at path. The Events' source
// host is node, or if empty the node its identity names (NodeOf).
func newClient(path, userAgent, node string, timeout time.Duration) (*client, error) {
	cfg, err := Config(path)
	if err != nil {
		return nil, err
	}
	cfg.UserAgent, cfg.Timeout = userAgent, timeout
	// One transport under both clients (client-go caches it by its TLS
	// configuration): one connection, one rotating client certificate.
	pods, err := metadata.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	evs, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
	}
	user := Identity(cfg)
	if node == "" {
		node = NodeOf(user)
	}
	return &client{pods: pods.Resource(podsResource), events: evs.Resource(eventsResource), node: node, server: cfg.Host, user: user}, nil
}

// Identity says who cfg authenticates as, as far as the file tells: the
// common name of its client certificate ("system:node:NAME" for a kubelet),
// or "a bearer token", or "anonymous".
func Identity(cfg *rest.Config) string {
	data := cfg.CertData
	if len(data) == 0 && cfg.CertFile != "" {
		data, _ = os.ReadFile(cfg.CertFile)
	}
	for len(data) > 0 {
		var b *pem.Block
		if b, data = pem.Decode(data); b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if c, err := x509.ParseCertificate(b.Bytes); err == nil {
			return c.Subject.CommonName
		}
		break
	}
	switch {
	case cfg.BearerToken != "" || cfg.BearerTokenFile != "":
		return "a bearer token"
	case cfg.Username != "":
		return cfg.Username
	}
	return "anonymous"
}

// NodeOf is the node an identity speaks for: NAME of system:node:NAME, else
// this host's name, lowercased as the kubelet's default node name is.
func NodeOf(user string) string {
	if n, ok := strings.CutPrefix(user, nodeUserPrefix); ok && n != "" {
		return n
	}
	h, _ := os.Hostname()
	return strings.ToLower(h)
}

// post reads e's pod and, if it is the pod e names (same uid), creates the
// Event on it. It says why it could not (ReasonNone: created).
func (c *client) post(ctx context.Context, e Event, now time.Time) (string, error) {
	if e.Node {
		return c.postNode(ctx, e, now)
	}
	if e.Pod.Namespace == "" || e.Pod.Name == "" || e.Pod.UID == "" {
		return ReasonPodNotFound, fmt.Errorf("the pod has no namespace, name or uid (%q/%q, uid %q)", e.Pod.Namespace, e.Pod.Name, e.Pod.UID)
	}
	pod, err := c.pods.Namespace(e.Pod.Namespace).Get(ctx, e.Pod.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsForbidden(err) && strings.HasPrefix(c.user, nodeUserPrefix):
		// The Node authorizer lets a node read the pods bound to it, and
		// no other: a pod it may not read is not this node's, or no pod.
		return ReasonPodNotFound, fmt.Errorf("get pod %s/%s: not a pod of node %s: %w", e.Pod.Namespace, e.Pod.Name, c.node, err)
	case err != nil:
		return classify(err), fmt.Errorf("get pod %s/%s: %w", e.Pod.Namespace, e.Pod.Name, err)
	}
	if string(pod.UID) != e.Pod.UID {
		return ReasonPodNotFound, fmt.Errorf("pod %s/%s is uid %s now, not %s", e.Pod.Namespace, e.Pod.Name, pod.UID, e.Pod.UID)
	}
	ev := newEvent(e, &pod.ObjectMeta, c.node, now)
	if _, err := c.events.Namespace(pod.Namespace).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return classify(err), fmt.Errorf("create event %s/%s: %w", pod.Namespace, ev.GetName(), err)
	}
	return ReasonNone, nil
}

// postNode creates e about the node c posts for, in the namespace
// default, where the apiserver keeps the Events of an object that has
// none (as the kubelet's own about its node).
func (c *client) postNode(ctx context.Context, e Event, now time.Time) (string, error) {
	ev := newNodeEvent(e, c.node, now)
	if _, err := c.events.Namespace(metav1.NamespaceDefault).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
		return classify(err), fmt.Errorf("create event %s/%s: %w", metav1.NamespaceDefault, ev.GetName(), err)
	}
	return ReasonNone, nil
}

// classify says what an apiserver's answer (or its absence) means for an
// event: only ReasonUnreachable is worth another attempt.
func classify(err error) string {
	var st apierrors.APIStatus
	switch {
	case apierrors.IsNotFound(err):
		return ReasonPodNotFound // the pod, or its namespace
	case apierrors.IsUnauthorized(err):
		return ReasonUnauthorized
	case apierrors.IsForbidden(err):
		return ReasonForbidden
	case apierrors.IsTooManyRequests(err), apierrors.IsServerTimeout(err), apierrors.IsTimeout(err),
		apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err), apierrors.IsUnexpectedServerError(err):
		return ReasonUnreachable
	case errors.As(err, &st) && st.Status().Code >= 500:
		return ReasonUnreachable
	case errors.As(err, &st):
		return ReasonRejected
	}
	return ReasonUnreachable // no answer: refused, reset, timed out
}

// newEvent is e as the core/v1 Event the kubelet would post about a
// container of pod (pkg/kubelet/container/ref.go, client-go tools/record),
// in core/v1's JSON field names (the Event type itself would link all of
// core/v1: +2 MB of binary and of resident memory; the golden test and the
// end-to-end tests, against kube-apiserver's validation, hold the shape).
func newEvent(e Event, pod *metav1.ObjectMeta, node string, now time.Time) *unstructured.Unstructured {
	ts := now.UTC().Format(time.RFC3339) // metav1.Time's JSON: seconds
	typ := "Normal"
	if e.Warning {
		typ = "Warning"
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Event",
		"metadata":   map[string]any{"name": fmt.Sprintf("%v.%x", pod.Name, now.UnixNano()), "namespace": pod.Namespace},
		"involvedObject": map[string]any{
			"apiVersion": "v1", "kind": "Pod", "namespace": pod.Namespace, "name": pod.Name, "uid": string(pod.UID),
			"resourceVersion": pod.ResourceVersion, "fieldPath": fieldPath(e.Container),
		},
		"reason":             e.Reason,
		"message":            truncate(e.Message, MaxMessage),
		"source":             map[string]any{"component": Component, "host": node},
		"firstTimestamp":     ts,
		"lastTimestamp":      ts,
		"count":              int64(1),
		"type":               typ,
		"reportingComponent": Component,
		"reportingInstance":  node,
	}}
}

// newNodeEvent is e as the core/v1 Event the kubelet posts about its node:
// the Node as involvedObject, its name as its uid (the kubelet's nodeRef).
func newNodeEvent(e Event, node string, now time.Time) *unstructured.Unstructured {
	ev := newEvent(e, &metav1.ObjectMeta{Namespace: metav1.NamespaceDefault, Name: node}, node, now)
	ev.Object["involvedObject"] = map[string]any{"apiVersion": "v1", "kind": "Node", "name": node, "uid": node}
	return ev
}

// fieldPath is the path of the container named name in its pod's spec, as
// the kubelet's ref.go writes it for an ephemeral container: the only kind
// whose create names a target.
func fieldPath(name string) string {
	return "spec.ephemeralContainers{" + name + "}"
}

// truncate cuts s to at most n bytes, at a rune's boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

func stampOf(fi os.FileInfo) stamp {
	st := stamp{mtime: fi.ModTime(), size: fi.Size()}
	if sys, ok := fi.Sys().(*syscall.Stat_t); ok {
		st.dev, st.ino = uint64(sys.Dev), uint64(sys.Ino)
	}
	return st
}
