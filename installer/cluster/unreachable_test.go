package cluster

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/cri-nstarget/cri-nstarget/installer"
)

var refused = &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}

// failing makes the fake apiserver's verb on resource fail with errs in
// turn, then answer; it counts the calls.
func failing(cs *fake.Clientset, verb, resource string, errs ...error) *int {
	calls := new(int)
	cs.PrependReactor(verb, resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		*calls++
		if *calls <= len(errs) {
			return true, nil, errs[*calls-1]
		}
		return false, nil, nil
	})
	return calls
}

// TestUnreachable: an apiserver that cannot be reached (or answers 5xx,
// 429) is told apart from one that answers: Ready says ErrUnreachable,
// SetState and Event retry with backoff; an answer (403) is not retried.
func TestUnreachable(t *testing.T) {
	ctx := context.Background()
	newNode := func() (*fake.Clientset, *Node) {
		cs := fake.NewClientset(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1"}})
		return cs, &Node{Nodes: cs.CoreV1().Nodes(), Events: cs.CoreV1().Events(EventNamespace), Name: "n1",
			Backoff: time.Millisecond, EventPatience: 200 * time.Millisecond}
	}
	gr := schema.GroupResource{Resource: "nodes"}
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{refused, true},
		{apierrors.NewServiceUnavailable("starting"), true},
		{apierrors.NewInternalError(errors.New("etcd")), true},
		{apierrors.NewTooManyRequests("slow down", 1), true},
		{apierrors.NewTimeoutError("timeout", 1), true},
		{apierrors.NewForbidden(gr, "n1", errors.New("no")), false},
		{apierrors.NewNotFound(gr, "n1"), false},
	} {
		cs, n := newNode()
		failing(cs, "get", "nodes", tc.err)
		_, _, err := n.Ready(ctx)
		if got := errors.Is(err, installer.ErrUnreachable); got != tc.want || err == nil {
			t.Errorf("Ready with %v: %v, unreachable %v, want %v", tc.err, err, got, tc.want)
		}
	}

	cs, n := newNode()
	calls := failing(cs, "patch", "nodes", refused, apierrors.NewServiceUnavailable("x"), refused)
	if err := n.SetState(ctx, installer.StateInstalled, "ok"); err != nil || *calls != 4 {
		t.Errorf("SetState through 3 failures: %v after %d calls", err, *calls)
	}
	cs, n = newNode()
	calls = failing(cs, "patch", "nodes", apierrors.NewForbidden(gr, "n1", errors.New("no")), refused)
	if err := n.SetState(ctx, installer.StateInstalled, "ok"); err == nil || errors.Is(err, installer.ErrUnreachable) || *calls != 1 {
		t.Errorf("SetState forbidden: %v after %d calls", err, *calls)
	}
	cctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	cs, n = newNode()
	failing(cs, "patch", "nodes", refused, refused, refused, refused, refused, refused, refused, refused, refused, refused, refused)
	if err := n.SetState(cctx, installer.StateInstalled, "ok"); !errors.Is(err, installer.ErrUnreachable) {
		t.Errorf("SetState down until ctx's end: %v", err)
	}

	cs, n = newNode()
	calls = failing(cs, "create", "events", refused, refused)
	n.Event(ctx, false, "Installed", "ok")
	if evs, _ := cs.CoreV1().Events(EventNamespace).List(ctx, metav1.ListOptions{}); len(evs.Items) != 1 || *calls != 3 {
		t.Errorf("Event through 2 failures: %d events after %d calls", len(evs.Items), *calls)
	}
	cs, n = newNode()
	down := make([]error, 1000)
	for i := range down {
		down[i] = refused
	}
	failing(cs, "create", "events", down...)
	start := time.Now()
	n.Event(ctx, false, "Installed", "ok")
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Event kept trying for %s, past its patience", d)
	}
}
