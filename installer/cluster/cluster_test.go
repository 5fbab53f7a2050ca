package cluster

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/cri-nstarget/cri-nstarget/installer"
)

func TestNode(t *testing.T) {
	hb := metav1.NewTime(time.Date(2026, 11, 28, 4, 0, 0, 0, time.UTC))
	cs := fake.NewClientset(&corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", UID: "uid-1", Labels: map[string]string{"keep": "me"}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse},
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: hb},
		}},
	})
	ctx := context.Background()
	n := &Node{Nodes: cs.CoreV1().Nodes(), Events: cs.CoreV1().Events(EventNamespace), Name: "n1"}
	ready, at, err := n.Ready(ctx)
	if err != nil || !ready || !at.Equal(hb.Time) {
		t.Errorf("Ready = %v %v %v", ready, at, err)
	}
	if err := n.SetState(ctx, installer.StateInstalled, "v1 installed"); err != nil {
		t.Fatal(err)
	}
	got, _ := cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if got.Labels[installer.LabelState] != "installed" || got.Annotations[installer.LabelState] != "v1 installed" || got.Labels["keep"] != "me" {
		t.Errorf("after SetState: labels %v annotations %v", got.Labels, got.Annotations)
	}
	if err := n.SetState(ctx, "", ""); err != nil {
		t.Fatal(err)
	}
	got, _ = cs.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if _, ok := got.Labels[installer.LabelState]; ok || got.Labels["keep"] != "me" {
		t.Errorf("after SetState(\"\"): labels %v", got.Labels)
	}
	n.Event(ctx, true, "RolledBack", "why")
	evs, _ := cs.CoreV1().Events(EventNamespace).List(ctx, metav1.ListOptions{})
	if len(evs.Items) != 1 {
		t.Fatalf("%d events", len(evs.Items))
	}
	e := evs.Items[0]
	if e.Namespace != "default" || e.InvolvedObject.Kind != "Node" || e.InvolvedObject.Name != "n1" || e.InvolvedObject.UID != "uid-1" || e.Type != corev1.EventTypeWarning ||
		e.Reason != "RolledBack" || e.Source.Component != Component || e.Source.Host != "n1" {
		t.Errorf("event %+v", e)
	}
}
