package upstream

import (
	"strings"
	"testing"
	"time"
)

func TestPairAndTable(t *testing.T) {
	pass := func(spec string) Result { return Result{Spec: spec, State: "passed", Time: time.Second} }
	fail := func(spec string) Result { return Result{Spec: spec, State: "failed", Time: 2 * time.Second} }
	for _, tc := range []struct {
		desc         string
		direct, shim []Result
		broken       []string
		verdict      string
	}{
		{"both pass", []Result{pass("b"), pass("a")}, []Result{pass("a"), pass("b")}, nil, "parity: holds (2 specs)"},
		{"fails through the shim only", []Result{pass("a")}, []Result{fail("a")}, []string{"a"}, "parity: BROKEN for 1 of 1 specs"},
		{"fails on both: parity holds", []Result{fail("a")}, []Result{fail("a")}, nil, "parity: holds (1 specs)"},
		{"passes through the shim only", []Result{fail("a")}, []Result{pass("a")}, nil, "parity: holds (1 specs)"},
		{"absent through the shim", []Result{pass("a")}, nil, []string{"a"}, "parity: BROKEN for 1 of 1 specs"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			rows := Pair(tc.direct, tc.shim)
			var broken []string
			for i, r := range rows {
				if i > 0 && rows[i-1].Spec >= r.Spec {
					t.Errorf("rows not in spec order: %q before %q", rows[i-1].Spec, r.Spec)
				}
				if r.Broken() {
					broken = append(broken, r.Spec)
				}
			}
			if strings.Join(broken, ",") != strings.Join(tc.broken, ",") {
				t.Errorf("broken = %v, want %v", broken, tc.broken)
			}
			table := Table("containerd-2.4", rows)
			if !strings.HasPrefix(table, "containerd-2.4\nspec ") || !strings.Contains(table, "\n"+tc.verdict+"\n") {
				t.Errorf("table:\n%s\nwant the title, the header and %q", table, tc.verdict)
			}
		})
	}
}
