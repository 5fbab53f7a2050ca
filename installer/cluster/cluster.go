// Package cluster is the installer's Node in the apiserver, through
// client-go: its Ready condition, its state label and annotation, and
// Events on it. An apiserver that cannot be reached (no connection, a
// timeout, 5xx, 429) is told apart from an answer: Ready's error then wraps
// installer.ErrUnreachable, SetState retries with backoff until ctx ends,
// and Event for EventPatience. The apiserver keeps an Event about a Node (which has no
// namespace) in the namespace default, as the kubelet's: `kubectl describe
// node` lists them with the kubelet's, and `kubectl events --for node/NAME`.
package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/cri-nstarget/cri-nstarget/installer"
)

// Component is the Events' source.
const Component = "cri-nstarget-install"

// EventNamespace is where the apiserver takes an Event about a Node.
const EventNamespace = "default"

// maxMessage bounds an Event's message, as the apiserver's own limit.
const maxMessage = 1024

// Nodes is the part of client-go's typed NodeInterface the installer uses.
type Nodes interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*corev1.Node, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Node, error)
}

// Events is one namespace's Events: the part of client-go's typed
// EventInterface the installer uses.
type Events interface {
	Create(ctx context.Context, e *corev1.Event, opts metav1.CreateOptions) (*corev1.Event, error)
}

// Node is one Node, seen by the installer on it.
type Node struct {
	Nodes  Nodes
	Events Events // the namespace default's (EventNamespace)
	Name   string // the Node's
	// Timeout bounds each call; default 10s.
	Timeout time.Duration
	// Backoff is the first pause between tries of a call that found the
	// apiserver unreachable, doubled each time up to 30 s; default 1s.
	// EventPatience bounds the tries of an Event; default 2m.
	Backoff       time.Duration
	EventPatience time.Duration

	mu  sync.Mutex
	uid types.UID
}

func (n *Node) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	t := n.Timeout
	if t == 0 {
		t = 10 * time.Second
	}
	return context.WithTimeout(ctx, t)
}

// Ready is the Node's Ready condition and its last heartbeat.
func (n *Node) Ready(ctx context.Context) (bool, time.Time, error) {
	ctx, cancel := n.ctx(ctx)
	defer cancel()
	node, err := n.Nodes.Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		return false, time.Time{}, classify(fmt.Sprintf("get node %s", n.Name), err)
	}
	n.mu.Lock()
	n.uid = node.UID
	n.mu.Unlock()
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, c.LastHeartbeatTime.Time, nil
		}
	}
	return false, time.Time{}, nil
}

// SetState sets the Node's state label and its detail annotation; an
// empty state removes both.
func (n *Node) SetState(ctx context.Context, state, detail string) error {
	var label, note any // JSON null removes
	if state != "" {
		label, note = state, detail
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels":      map[string]any{installer.LabelState: label},
		"annotations": map[string]any{installer.LabelState: note},
	}})
	if err != nil {
		return err
	}
	return n.retry(ctx, fmt.Sprintf("label node %s", n.Name), func(ctx context.Context) error {
		_, err := n.Nodes.Patch(ctx, n.Name, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	})
}

// Event posts an Event on the Node, best effort: an error is returned to
// no one, the installer's log has the same message.
func (n *Node) Event(ctx context.Context, warning bool, reason, message string) {
	patience := n.EventPatience
	if patience <= 0 {
		patience = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, patience)
	defer cancel()
	ev := n.event(warning, reason, message)
	_ = n.retry(ctx, "post an event", func(ctx context.Context) error {
		if ev.InvolvedObject.UID == "" {
			if node, err := n.Nodes.Get(ctx, n.Name, metav1.GetOptions{}); err == nil {
				ev.InvolvedObject.UID = node.UID
			}
		}
		_, err := n.Events.Create(ctx, ev, metav1.CreateOptions{})
		return err
	})
}

// event is the Event to post.
func (n *Node) event(warning bool, reason, message string) *corev1.Event {
	n.mu.Lock()
	uid := n.uid
	n.mu.Unlock()
	typ := corev1.EventTypeNormal
	if warning {
		typ = corev1.EventTypeWarning
	}
	if len(message) > maxMessage {
		message = message[:maxMessage-3] + "..."
	}
	now := metav1.Now()
	return &corev1.Event{
		ObjectMeta:          metav1.ObjectMeta{GenerateName: n.Name + ".", Namespace: EventNamespace},
		InvolvedObject:      corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: n.Name, UID: uid},
		Reason:              reason,
		Message:             message,
		Type:                typ,
		Source:              corev1.EventSource{Component: Component, Host: n.Name},
		FirstTimestamp:      now,
		LastTimestamp:       now,
		Count:               1,
		ReportingController: "cri-nstarget.io/install",
		ReportingInstance:   n.Name,
	}
}
