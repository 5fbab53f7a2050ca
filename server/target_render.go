package server

import (
	nriapi "github.com/containerd/nri/pkg/api"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// The two renderings of one decision: what targeting reads of the container
// the backend made (a specView: its stored spec on the Update path, the NRI
// event's copy of it), and what it writes into it (a pointing), as spec
// options or as an NRI adjustment. Each path sets the record's Via here,
// where it renders.

// specView is what targeting reads of the container the backend made.
type specView struct {
	ns     map[string]string // namespace type -> path ("" for a new one)
	mounts []specs.Mount
}

func viewOfSpec(s *specs.Spec) specView {
	v := specView{ns: map[string]string{}, mounts: s.Mounts}
	if s.Linux != nil {
		for _, n := range s.Linux.Namespaces {
			v.ns[string(n.Type)] = n.Path
		}
	}
	return v
}

// pointing is what targeting writes into the container: the namespaces it
// joins (type -> pin) and the /dev/shm mount that replaces the backend's.
type pointing struct {
	ns  map[string]string
	shm *specs.Mount
}

// viewOfNRI is the NRI event's copy of the container's spec.
func viewOfNRI(c *nriapi.Container) specView {
	v := specView{ns: map[string]string{}}
	for _, n := range c.GetLinux().GetNamespaces() {
		v.ns[n.GetType()] = n.GetPath()
	}
	for _, m := range c.GetMounts() {
		v.mounts = append(v.mounts, specs.Mount{Destination: m.GetDestination(), Type: m.GetType(), Source: m.GetSource(), Options: m.GetOptions()})
	}
	return v
}

// renderSpec renders d, which points the container at p, for the Update
// path: it records that the spec is written that way, and answers the spec
// options that write it into the stored spec, the record last.
func renderSpec(d *decision, p pointing) []oci.Opt {
	d.rec.Via = ViaUpdate
	var opts []oci.Opt
	for kind, path := range p.ns {
		opts = append(opts, oci.WithNamespacePath(specs.LinuxNamespaceType(kind), path))
	}
	if p.shm != nil {
		opts = append(opts, oci.WithMount(*p.shm))
	}
	return append(opts, oci.WithRecord(d.rec))
}

// renderNRI renders d, which points the container at p, for the NRI path:
// it records that the spec is written that way, and answers the adjustment
// containerd applies inside its create, the record as an annotation.
func renderNRI(d *decision, p pointing) (*nriapi.ContainerAdjustment, error) {
	d.rec.Via = ViaNRI
	enc, err := d.rec.Encode()
	if err != nil {
		return nil, err
	}
	adj := &nriapi.ContainerAdjustment{}
	for kind, path := range p.ns {
		adj.AddOrReplaceNamespace(&nriapi.LinuxNamespace{Type: kind, Path: path})
	}
	if m := p.shm; m != nil {
		adj.AddMount(&nriapi.Mount{Destination: m.Destination, Type: m.Type, Source: m.Source, Options: m.Options})
	}
	adj.AddAnnotation(oci.AnnotationTargeting, enc)
	return adj, nil
}
