package oci

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

func TestWithNamespacePath(t *testing.T) {
	for _, tc := range []struct {
		desc     string
		spec     specs.Spec
		expected []specs.LinuxNamespace
	}{
		{
			desc:     "zero spec gets the entry",
			expected: []specs.LinuxNamespace{{Type: specs.PIDNamespace, Path: "/pin/pid"}},
		},
		{
			desc: "existing entry is replaced, others kept",
			spec: specs.Spec{Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{
				{Type: specs.NetworkNamespace, Path: "/proc/7/ns/net"},
				{Type: specs.PIDNamespace, Path: "/proc/7/ns/pid"},
			}}},
			expected: []specs.LinuxNamespace{
				{Type: specs.NetworkNamespace, Path: "/proc/7/ns/net"},
				{Type: specs.PIDNamespace, Path: "/pin/pid"},
			},
		},
		{
			desc:     "new-namespace entry gets the path",
			spec:     specs.Spec{Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: specs.PIDNamespace}}}},
			expected: []specs.LinuxNamespace{{Type: specs.PIDNamespace, Path: "/pin/pid"}},
		},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			s := tc.spec
			if err := Apply(&s, WithNamespacePath(specs.PIDNamespace, "/pin/pid")); err != nil {
				t.Fatal(err)
			}
			got, _ := json.Marshal(s.Linux.Namespaces)
			want, _ := json.Marshal(tc.expected)
			if string(got) != string(want) {
				t.Errorf("namespaces = %s, want %s", got, want)
			}
		})
	}
}

func TestWithNamespacePathRefusesBadPaths(t *testing.T) {
	for _, p := range []string{"", "pins/x/pid", "/run/\x80/pid"} {
		var s specs.Spec
		if err := Apply(&s, WithNamespacePath(specs.PIDNamespace, p)); err == nil {
			t.Errorf("path %q accepted: the container would not join the namespace meant", p)
		}
	}
}

func TestNamespacePath(t *testing.T) {
	s := &specs.Spec{Linux: &specs.Linux{Namespaces: []specs.LinuxNamespace{{Type: specs.IPCNamespace, Path: "/x"}}}}
	if p, ok := NamespacePath(s, specs.IPCNamespace); !ok || p != "/x" {
		t.Errorf("ipc = %q %v, want /x true", p, ok)
	}
	if _, ok := NamespacePath(s, specs.PIDNamespace); ok {
		t.Error("pid entry reported present")
	}
	if _, ok := NamespacePath(&specs.Spec{}, specs.PIDNamespace); ok {
		t.Error("zero spec reported an entry")
	}
}

func TestRecordRoundTrip(t *testing.T) {
	rec := Record{Target: "abc", Namespaces: map[string]NamespaceRecord{
		"pid": {Result: Targeted, Stage: "create", Path: "/run/pins/x/pid", Inode: 4026532, PodPath: "/proc/9/ns/pid"},
		"ipc": {Result: Targeted, Stage: "create", Path: "/run/pins/x/ipc", Shares: []string{"sysv", "mqueue", "shm"}, Shm: "/run/pins/x/shm", PodShm: "/run/sb/shm"},
	}}
	var s specs.Spec
	if err := Apply(&s, WithRecord(rec)); err != nil {
		t.Fatal(err)
	}
	got, ok, err := ParseRecord(s.Annotations)
	if err != nil || !ok {
		t.Fatalf("ParseRecord: ok=%v err=%v", ok, err)
	}
	if !reflect.DeepEqual(got, rec) {
		t.Errorf("round trip = %+v, want %+v", got, rec)
	}
	if _, ok, _ := ParseRecord(map[string]string{"other": "x"}); ok {
		t.Error("record found where there is none")
	}
	if _, _, err := ParseRecord(map[string]string{AnnotationTargeting: "{"}); err == nil {
		t.Error("broken record accepted")
	}
}

// TestPatchKeepsUnknownFields: a spec written by a newer runtime may carry
// fields this runtime-spec version does not know; Patch must not drop them.
func TestPatchKeepsUnknownFields(t *testing.T) {
	raw := `{"ociVersion":"1.2.0","futureTop":{"a":1},"process":{"args":["sh"],"futureProc":true},` +
		`"linux":{"futureLinux":[1,2],"namespaces":[{"type":"pid","path":"/proc/5/ns/pid"},{"type":"mount"}]}}`
	out, err := Patch([]byte(raw), func(s *specs.Spec) ([]Opt, error) {
		if p, _ := NamespacePath(s, specs.PIDNamespace); p != "/proc/5/ns/pid" {
			t.Errorf("edit saw pid path %q", p)
		}
		return []Opt{WithNamespacePath(specs.PIDNamespace, "/pin/pid"), WithAnnotation("k", "v")}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"futureTop":{"a":1}`, `"futureProc":true`, `"futureLinux":[1,2]`,
		`{"type":"pid","path":"/pin/pid"}`, `{"type":"mount"}`, `"annotations":{"k":"v"}`} {
		if !strings.Contains(string(out), want) {
			t.Errorf("patched spec lacks %s:\n%s", want, out)
		}
	}
}

func TestPatchPropagatesErrors(t *testing.T) {
	if _, err := Patch([]byte("{"), func(*specs.Spec) ([]Opt, error) { return nil, nil }); err == nil {
		t.Error("broken JSON accepted")
	}
	_, err := Patch([]byte("{}"), func(*specs.Spec) ([]Opt, error) {
		return []Opt{WithNamespacePath(specs.PIDNamespace, "")}, nil
	})
	if err == nil {
		t.Error("failing option ignored")
	}
}

func TestWithMount(t *testing.T) {
	shm := specs.Mount{Destination: "/dev/shm", Type: "bind", Source: "/run/pins/x/shm", Options: []string{"rbind", "rw"}}
	s := specs.Spec{Mounts: []specs.Mount{
		{Destination: "/proc", Type: "proc", Source: "proc"},
		{Destination: "/dev/shm", Type: "tmpfs", Source: "shm"},
		{Destination: "/dev/shm/", Type: "bind", Source: "/run/sb/shm"},
	}}
	if err := Apply(&s, WithMount(shm)); err != nil {
		t.Fatal(err)
	}
	if len(s.Mounts) != 3 || !reflect.DeepEqual(s.Mounts[2], shm) || s.Mounts[1].Type != "tmpfs" {
		t.Errorf("the last /dev/shm mount must be replaced: %+v", s.Mounts)
	}
	var empty specs.Spec
	if err := Apply(&empty, WithMount(shm)); err != nil || len(empty.Mounts) != 1 {
		t.Errorf("no /dev/shm mount: want it appended, got %+v %v", empty.Mounts, err)
	}
	for _, bad := range []specs.Mount{{Destination: "dev/shm", Source: "/x"}, {Destination: "/dev/shm", Type: "bind", Source: "x"}, {Destination: "/dev/shm", Source: "/\xff"}} {
		if err := Apply(&specs.Spec{}, WithMount(bad)); err == nil {
			t.Errorf("WithMount(%+v) accepted", bad)
		}
	}
}

// Patch rewrites only the mount entries an option changed, keeping their
// other fields (here uidMappings, which this runtime-spec version may not
// know as such, and an unknown one), and leaves the rest byte for byte.
func TestPatchMounts(t *testing.T) {
	raw := []byte(`{"mounts":[{"destination":"/proc","type":"proc","source":"proc","future":[1]},` +
		`{"destination":"/dev/shm","type":"bind","source":"/run/sb/shm","options":["rbind","ro"],"uidMappings":[{"containerID":0,"hostID":65536,"size":65536}],"future":true}],"future":{}}`)
	out, err := Patch(raw, func(s *specs.Spec) ([]Opt, error) {
		if i := MountIndex(s, "/dev/shm"); i != 1 || s.Mounts[i].Source != "/run/sb/shm" {
			t.Errorf("edit sees mount %d of %+v", i, s.Mounts)
		}
		m := s.Mounts[1]
		m.Source = "/run/pins/x/shm"
		return []Opt{WithMount(m), WithMount(specs.Mount{Destination: "/extra", Type: "bind", Source: "/e"})}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Mounts []map[string]json.RawMessage `json:"mounts"`
	}
	if err := json.Unmarshal(out, &got); err != nil || len(got.Mounts) != 3 {
		t.Fatalf("patched: %s %v", out, err)
	}
	if string(got.Mounts[0]["future"]) != "[1]" {
		t.Errorf("unchanged entry altered: %s", out)
	}
	shm := got.Mounts[1]
	if string(shm["source"]) != `"/run/pins/x/shm"` || string(shm["future"]) != "true" || len(shm["uidMappings"]) == 0 || string(shm["options"]) != `["rbind","ro"]` {
		t.Errorf("changed entry: %s", out)
	}
	if string(got.Mounts[2]["destination"]) != `"/extra"` {
		t.Errorf("appended entry: %s", out)
	}

	// no mount changed: the mounts are the stored bytes
	out, err = Patch(raw, func(*specs.Spec) ([]Opt, error) { return []Opt{WithAnnotation("a", "b")}, nil })
	if err != nil || !strings.Contains(string(out), `"future":[1]},{"destination":"/dev/shm","type":"bind"`) {
		t.Errorf("unchanged mounts were re-encoded: %s %v", out, err)
	}
}

// A key that only case-folds to a field Patch rewrites is that field to Go
// decoders (runc's), so Patch refuses the spec rather than write the field
// beside it.
func TestPatchRefusesCaseVariantKeys(t *testing.T) {
	shm := specs.Mount{Destination: "/dev/shm", Type: "bind", Source: "/pin/shm"}
	for _, tc := range []struct {
		raw   string
		reads func(specs.Spec) bool // encoding/json reads the variant as the field
	}{
		{`{"Linux":{"namespaces":[{"type":"pid","path":"/proc/5/ns/pid"}]}}`,
			func(s specs.Spec) bool { return s.Linux != nil }},
		{`{"linux":{"nameSpaces":[{"type":"pid","path":"/proc/5/ns/pid"}]}}`,
			func(s specs.Spec) bool { return s.Linux != nil && len(s.Linux.Namespaces) == 1 }},
		{`{"annotations":{"a":"b"},"annotationſ":{"c":"d"}}`,
			func(s specs.Spec) bool { return s.Annotations["c"] == "d" }},
		{`{"mounts":[{"destination":"/dev/shm","type":"tmpfs","source":"shm","Source":"/elsewhere"}]}`,
			func(s specs.Spec) bool { return len(s.Mounts) == 1 && s.Mounts[0].Source == "/elsewhere" }},
	} {
		var s specs.Spec
		if err := json.Unmarshal([]byte(tc.raw), &s); err != nil || !tc.reads(s) {
			t.Fatalf("%s: encoding/json does not read the variant as the field: %+v %v", tc.raw, s, err)
		}
		out, err := Patch([]byte(tc.raw), func(*specs.Spec) ([]Opt, error) {
			return []Opt{WithNamespacePath(specs.PIDNamespace, "/pin/pid"), WithAnnotation("k", "v"), WithMount(shm)}, nil
		})
		if err == nil || !strings.Contains(err.Error(), "stands for") {
			t.Errorf("%s: patched to %s (err %v), want it refused", tc.raw, out, err)
		}
	}
}
