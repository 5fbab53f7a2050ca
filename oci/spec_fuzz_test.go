package oci

import (
	"encoding/json"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// FuzzPatch: on any stored spec JSON, Patch never panics; when it succeeds,
// the result is a spec whose pid namespace is the requested path, whose
// record reads back, and which keeps every top-level field of the input.
func FuzzPatch(f *testing.F) {
	for _, s := range []string{
		`{}`, `null`, `[]`, `{"linux":null}`, `{"linux":{"namespaces":null}}`, `{"annotations":{"a":"b"}}`,
		`{"ociVersion":"1.2.0","linux":{"namespaces":[{"type":"pid","path":"/proc/1/ns/pid"}],"future":1},"future":{}}`,
	} {
		f.Add([]byte(s), "/run/cri-nstarget/pins/x/pid")
	}
	f.Fuzz(func(t *testing.T, raw []byte, path string) {
		rec := Record{Target: "t", Namespaces: map[string]NamespaceRecord{"pid": {Result: Targeted, Path: path}}}
		out, err := Patch(raw, func(*specs.Spec) ([]Opt, error) {
			return []Opt{WithNamespacePath(specs.PIDNamespace, path), WithRecord(rec)}, nil
		})
		if err != nil {
			return
		}
		var s specs.Spec
		if err := json.Unmarshal(out, &s); err != nil {
			t.Fatalf("patched spec does not decode: %v\n%s", err, out)
		}
		if got, _ := NamespacePath(&s, specs.PIDNamespace); got != path {
			t.Fatalf("pid path = %q, want %q", got, path)
		}
		if r, ok, err := ParseRecord(s.Annotations); !ok || err != nil || r.Namespaces["pid"].Path != path {
			t.Fatalf("record = %+v %v %v", r, ok, err)
		}
		var in, res map[string]json.RawMessage
		json.Unmarshal(raw, &in)
		json.Unmarshal(out, &res)
		for k := range in {
			if _, ok := res[k]; !ok {
				t.Fatalf("field %q lost", k)
			}
		}
	})
}
