package server

import (
	"maps"
	"testing"

	nriapi "github.com/containerd/nri/pkg/api"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// TestRenderBothWays: one decision rendered for each path writes the same
// into the container: the spec options applied to a spec, and the NRI
// adjustment as containerd applies it, give the same namespaces, /dev/shm
// and record.
func TestRenderBothWays(t *testing.T) {
	shm := &specs.Mount{Destination: "/dev/shm", Type: "bind", Source: "/pins/c/shm", Options: []string{"rbind", "rw"}}
	rec := oci.Record{Target: "app", Via: ViaNRI, Namespaces: map[string]oci.NamespaceRecord{
		"pid": {Result: oci.Targeted, Path: "/pins/c/pid"}, "ipc": {Result: oci.Fallback, Reason: "r"}}}
	for _, tc := range []struct {
		desc string
		p    pointing
	}{
		{"nothing joins: the record alone", pointing{}},
		{"pid", pointing{ns: map[string]string{"pid": "/pins/c/pid"}}},
		{"pid and ipc, the target's /dev/shm", pointing{ns: map[string]string{"pid": "/pins/c/pid", "ipc": "/pins/c/ipc"}, shm: shm}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			made := func() *specs.Spec {
				return &specs.Spec{Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: "pid", Path: "/proc/42/ns/pid"}, {Type: "ipc", Path: "/proc/42/ns/ipc"}}},
					Mounts: []specs.Mount{{Destination: "/dev/shm", Type: "bind", Source: "/pod/shm"}}}
			}
			viaSpec := made()
			ds := decision{rec: rec}
			if err := oci.Apply(viaSpec, renderSpec(&ds, tc.p)...); err != nil {
				t.Fatal(err)
			}
			dn := decision{rec: rec}
			adj, err := renderNRI(&dn, tc.p)
			if err != nil {
				t.Fatal(err)
			}
			if ds.rec.Via != ViaUpdate || dn.rec.Via != ViaNRI {
				t.Errorf("rendered via %q and %q, want each path's", ds.rec.Via, dn.rec.Via)
			}
			viaNRI := made()
			if err := applyAdjustment(viaNRI, adj); err != nil {
				t.Fatal(err)
			}
			if !viewsEqual(viewOfSpec(viaSpec), viewOfSpec(viaNRI)) || !recordsEqual(t, viaSpec, viaNRI) {
				t.Errorf("the two renderings differ:\nspec %+v %v\n nri %+v %v", viewOfSpec(viaSpec), viaSpec.Annotations, viewOfSpec(viaNRI), viaNRI.Annotations)
			}
			for kind, path := range tc.p.ns {
				if got, _ := oci.NamespacePath(viaSpec, specs.LinuxNamespaceType(kind)); got != path {
					t.Errorf("%s path %q, want %q", kind, got, path)
				}
			}
			if got, ok, err := oci.ParseRecord(viaSpec.Annotations); !ok || err != nil || got.Target != "app" {
				t.Errorf("record %+v %v %v", got, ok, err)
			}
		})
	}
}

// applyAdjustment applies adj to s as containerd does with an NRI answer.
func applyAdjustment(s *specs.Spec, adj *nriapi.ContainerAdjustment) error {
	var opts []oci.Opt
	for _, n := range adj.GetLinux().GetNamespaces() {
		opts = append(opts, oci.WithNamespacePath(specs.LinuxNamespaceType(n.GetType()), n.GetPath()))
	}
	for _, m := range adj.GetMounts() {
		opts = append(opts, oci.WithMount(specs.Mount{Destination: m.GetDestination(), Type: m.GetType(), Source: m.GetSource(), Options: m.GetOptions()}))
	}
	if err := oci.Apply(s, opts...); err != nil {
		return err
	}
	if len(adj.GetAnnotations()) > 0 && s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	maps.Copy(s.Annotations, adj.GetAnnotations())
	return nil
}

func viewsEqual(a, b specView) bool {
	if !maps.Equal(a.ns, b.ns) || len(a.mounts) != len(b.mounts) {
		return false
	}
	for i := range a.mounts {
		if a.mounts[i].Destination != b.mounts[i].Destination || a.mounts[i].Source != b.mounts[i].Source || a.mounts[i].Type != b.mounts[i].Type {
			return false
		}
	}
	return true
}

// recordsEqual: the two specs carry the same record but for how it was
// written (Via).
func recordsEqual(t *testing.T, a, b *specs.Spec) bool {
	t.Helper()
	ra, _, err := oci.ParseRecord(a.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	rb, _, err := oci.ParseRecord(b.Annotations)
	if err != nil {
		t.Fatal(err)
	}
	ra.Via, rb.Via = "", ""
	ea, _ := ra.Encode()
	eb, _ := rb.Encode()
	return ea == eb && len(a.Annotations) == len(b.Annotations)
}
