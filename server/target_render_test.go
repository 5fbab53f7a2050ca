package server

import (
	"maps"
	"slices"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// TestRenderBothWays: one decision rendered for each path writes the same
// into the container: the spec options applied to a spec (the shim's own
// code, the Update path), and the NRI adjustment as containerd applies it
// (NRI's generate package over runtime-tools', applyAdjustment), give the
// same namespaces, the same mount at each destination, and the same record
// but for how it was written (Via).
func TestRenderBothWays(t *testing.T) {
	shm := &specs.Mount{Destination: "/dev/shm", Type: "bind", Source: "/pins/c/shm", Options: []string{"rbind", "rprivate", "rw"}}
	rec := oci.Record{Target: "app", Namespaces: map[string]oci.NamespaceRecord{
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
			// as containerd makes it for a container of a pod with its own
			// pid and ipc namespaces
			made := func() *specs.Spec {
				return &specs.Spec{Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: "pid", Path: "/proc/42/ns/pid"}, {Type: "ipc", Path: "/proc/42/ns/ipc"}, {Type: "mount"}}},
					Mounts: []specs.Mount{{Destination: "/proc", Type: "proc", Source: "proc"}, {Destination: "/dev", Type: "tmpfs", Source: "tmpfs"},
						{Destination: "/dev/shm", Type: "bind", Source: "/pod/shm", Options: []string{"rbind", "rprivate", "rw"}},
						{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue"}, {Destination: "/etc/hosts", Type: "bind", Source: "/pod/hosts"}},
					Annotations: map[string]string{criNameAnnotation: "debugger"}}
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
			if a, b := viewOfSpec(viaSpec), viewOfSpec(viaNRI); !maps.Equal(a.ns, b.ns) || !maps.EqualFunc(seen(a.mounts), seen(b.mounts), mountsEqual) {
				t.Errorf("the two renderings differ:\nspec %+v\n nri %+v", a, b)
			}
			if !recordsEqual(t, viaSpec, viaNRI) || viaNRI.Annotations[criNameAnnotation] != "debugger" {
				t.Errorf("the two records differ, or the backend's annotations are lost:\nspec %v\n nri %v", viaSpec.Annotations, viaNRI.Annotations)
			}
			for kind, path := range tc.p.ns {
				if got, _ := oci.NamespacePath(viaNRI, specs.LinuxNamespaceType(kind)); got != path {
					t.Errorf("%s path %q, want %q", kind, got, path)
				}
			}
			if m := seen(viaNRI.Mounts)["/dev/shm"]; tc.p.shm != nil && !mountsEqual(m, *tc.p.shm) {
				t.Errorf("/dev/shm is %+v, want the pin %+v", m, *tc.p.shm)
			}
		})
	}
}

// seen is the mount a container sees at each destination: the last there.
func seen(ms []specs.Mount) map[string]specs.Mount {
	out := map[string]specs.Mount{}
	for _, m := range ms {
		out[m.Destination] = m
	}
	return out
}

func mountsEqual(a, b specs.Mount) bool {
	return a.Destination == b.Destination && a.Type == b.Type && a.Source == b.Source && slices.Equal(a.Options, b.Options)
}

// recordsEqual: the two specs carry the same record but for how it was
// written (Via), and the same annotations besides.
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
