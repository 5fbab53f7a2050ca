package critesting

import (
	"errors"
	"strings"
	"testing"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

func TestInfo(t *testing.T) {
	rec, err := oci.Record{Target: "app", Via: "nri"}.Encode()
	if err != nil {
		t.Fatal(err)
	}
	spec := `"runtimeSpec":{"ociVersion":"1.2.0","annotations":{"` + oci.AnnotationTargeting + `":` + quote(rec) + `}}`
	for _, tc := range []struct {
		desc      string
		info      string
		statusErr error
		fatal     string // what Info or Record fails with; "" for none
		pid       int
		target    string
	}{
		{desc: "a record", info: `{"pid":42,"config":{"metadata":{"name":"dbg"}},` + spec + `}`, pid: 42, target: "app"},
		{desc: "no task", info: `{"config":{"metadata":{"name":"dbg"}},` + spec + `}`, target: "app"},
		{desc: "no record", info: `{"pid":42,"runtimeSpec":{"ociVersion":"1.2.0"}}`, fatal: "no " + oci.AnnotationTargeting + " annotation"},
		{desc: "a record that does not parse", info: `{"runtimeSpec":{"annotations":{"` + oci.AnnotationTargeting + `":"{"}}}`, fatal: "no " + oci.AnnotationTargeting + " annotation: ok=true"},
		{desc: "no spec", info: `{"pid":42}`, fatal: "has no runtimeSpec"},
		{desc: "not JSON", info: `pid=42`, fatal: "verbose info of c1: invalid character"},
		{desc: "the call fails", statusErr: errors.New("unavailable"), fatal: "ContainerStatus c1: unavailable"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := CRI{Runtime: &fakeRuntime{info: tc.info, statusErr: tc.statusErr}}
			var ci ContainerInfo
			var r oci.Record
			fatal := run(func(ft testing.TB) {
				ci = c.Info(ft, "c1")
				r = ci.Record(ft)
			})
			if tc.fatal != "" {
				if !strings.Contains(fatal, tc.fatal) {
					t.Errorf("failed with %q, want %q", fatal, tc.fatal)
				}
				return
			}
			if fatal != "" {
				t.Fatalf("failed: %s", fatal)
			}
			if ci.Pid != tc.pid || ci.Config.GetMetadata().GetName() != "dbg" || r.Target != tc.target || r.Via != "nri" {
				t.Errorf("info %+v, record %+v", ci, r)
			}
		})
	}
}

func quote(s string) string { return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"` }
