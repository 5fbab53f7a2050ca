package cluster

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/cri-nstarget/cri-nstarget/installer/slots"
)

// Clients are client-go REST clients for the three kinds the installer
// touches (Nodes, Events of EventNamespace, Leases of namespace), with a scheme of their
// API groups alone. client-go's typed clientset registers every API group
// of Kubernetes: the installer would be 41 MB instead of 24 (stripped).
func Clients(cfg *rest.Config, namespace string) (Nodes, Events, slots.Leases, error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, nil, nil, err
	}
	if err := coordinationv1.AddToScheme(scheme); err != nil {
		return nil, nil, nil, err
	}
	codecs := serializer.NewCodecFactory(scheme).WithoutConversion()
	core, err := restClient(cfg, "/api", corev1.SchemeGroupVersion, codecs)
	if err != nil {
		return nil, nil, nil, err
	}
	coord, err := restClient(cfg, "/apis", coordinationv1.SchemeGroupVersion, codecs)
	if err != nil {
		return nil, nil, nil, err
	}
	return restNodes{core}, restEvents{core, EventNamespace}, restLeases{coord, namespace}, nil
}

func restClient(cfg *rest.Config, apiPath string, gv schema.GroupVersion, codecs runtime.NegotiatedSerializer) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath, c.GroupVersion, c.NegotiatedSerializer = apiPath, &gv, codecs
	c.ContentType = runtime.ContentTypeJSON
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", gv, err)
	}
	return rc, nil
}

type restNodes struct{ c *rest.RESTClient }

func (n restNodes) Get(ctx context.Context, name string, _ metav1.GetOptions) (*corev1.Node, error) {
	out := &corev1.Node{}
	return out, n.c.Get().Resource("nodes").Name(name).Do(ctx).Into(out)
}

func (n restNodes) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, _ metav1.PatchOptions, _ ...string) (*corev1.Node, error) {
	out := &corev1.Node{}
	return out, n.c.Patch(pt).Resource("nodes").Name(name).Body(data).Do(ctx).Into(out)
}

type restEvents struct {
	c  *rest.RESTClient
	ns string
}

func (e restEvents) Create(ctx context.Context, ev *corev1.Event, _ metav1.CreateOptions) (*corev1.Event, error) {
	out := &corev1.Event{}
	return out, e.c.Post().Namespace(e.ns).Resource("events").Body(ev).Do(ctx).Into(out)
}

type restLeases struct {
	c  *rest.RESTClient
	ns string
}

func (l restLeases) Get(ctx context.Context, name string, _ metav1.GetOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	return out, l.c.Get().Namespace(l.ns).Resource("leases").Name(name).Do(ctx).Into(out)
}

func (l restLeases) Create(ctx context.Context, lease *coordinationv1.Lease, _ metav1.CreateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	return out, l.c.Post().Namespace(l.ns).Resource("leases").Body(lease).Do(ctx).Into(out)
}

func (l restLeases) Update(ctx context.Context, lease *coordinationv1.Lease, _ metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	out := &coordinationv1.Lease{}
	return out, l.c.Put().Namespace(l.ns).Resource("leases").Name(lease.Name).Body(lease).Do(ctx).Into(out)
}
