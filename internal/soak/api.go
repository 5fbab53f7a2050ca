package soak

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/cri-nstarget/cri-nstarget/internal/cluster"
)

// api is the few apiserver calls the soak makes, over client-go's dynamic
// client with core/v1's types (the typed clientset would bring its
// apply-configurations' dependencies into go.mod).
type api struct{ dyn dynamic.Interface }

// namespace is where the soak's pods live.
const namespace = "default"

var (
	podsGVR  = schema.GroupVersionResource{Version: "v1", Resource: "pods"}
	nodesGVR = schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
)

func (a *api) pods() dynamic.ResourceInterface { return a.dyn.Resource(podsGVR).Namespace(namespace) }

func toUnstructured(obj any) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: m}, nil
}

func (a *api) createPod(ctx context.Context, p *corev1.Pod) error {
	u, err := toUnstructured(p)
	if err != nil {
		return err
	}
	u.SetAPIVersion("v1")
	u.SetKind("Pod")
	_, err = a.pods().Create(ctx, u, metav1.CreateOptions{})
	return err
}

func (a *api) deletePod(ctx context.Context, name string) error {
	grace := int64(1)
	return a.pods().Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &grace})
}

func (a *api) listPods(ctx context.Context) ([]corev1.Pod, error) {
	l, err := a.pods().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	pods := make([]corev1.Pod, len(l.Items))
	for i := range l.Items {
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(l.Items[i].Object, &pods[i]); err != nil {
			return nil, err
		}
	}
	return pods, nil
}

func (a *api) getPod(ctx context.Context, name string) (*corev1.Pod, error) {
	u, err := a.pods().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	var p corev1.Pod
	return &p, runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &p)
}

// addEphemeral adds ec to the pod through its ephemeralcontainers
// subresource, as kubectl debug does.
func (a *api) addEphemeral(ctx context.Context, name string, ec corev1.EphemeralContainer) error {
	p, err := a.getPod(ctx, name)
	if err != nil {
		return err
	}
	p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, ec)
	u, err := toUnstructured(p)
	if err != nil {
		return err
	}
	u.SetAPIVersion("v1")
	u.SetKind("Pod")
	_, err = a.pods().Update(ctx, u, metav1.UpdateOptions{}, "ephemeralcontainers")
	return err
}

// nodeReady reports whether the node's Ready condition is True.
func (a *api) nodeReady(ctx context.Context) (bool, error) {
	u, err := a.dyn.Resource(nodesGVR).Get(ctx, cluster.NodeName, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	var n corev1.Node
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &n); err != nil {
		return false, err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}
