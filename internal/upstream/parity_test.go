package upstream

import (
	"regexp"
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

func TestMarkdown(t *testing.T) {
	pass := func(spec string) Result { return Result{Spec: spec, State: "passed", Time: time.Second} }
	fail := func(spec string) Result {
		return Result{Spec: spec, State: "failed", Time: 2 * time.Second, Message: "boom"}
	}
	skip := func(spec, msg string) Result { return Result{Spec: spec, State: "skipped", Message: msg} }
	reasons := []Reason{{regexp.MustCompile(`needs a cloud`), "no cloud here"}}

	table, err := Markdown([]Backend{
		{"containerd-2.4", Pair(
			[]Result{pass("a"), fail("b needs a cloud"), skip("c", "Only supported for providers [gce]")},
			[]Result{pass("a"), fail("b needs a cloud"), skip("c", "Only supported for providers [gce]")})},
		{"containerd-1.6", Pair([]Result{pass("a"), fail("e needs a cloud")}, []Result{pass("a"), fail("e needs a cloud")})},
		{"containerd-1.7", Pair([]Result{fail("e needs a cloud")}, []Result{fail("e needs a cloud")})},
	}, reasons)
	if err != nil {
		t.Fatalf("explained and in parity, yet: %v", err)
	}
	for _, want := range []string{
		"- containerd-2.4: 3 specs; 1 pass directly, 1 through the shim; parity holds.",
		"| spec | containerd-2.4 direct / shim | time | containerd-1.6 direct / shim | time | containerd-1.7 direct / shim | time |",
		"| `a` | passed / passed | 1s / 1s | passed / passed | 1s / 1s | absent | - |",
		"| `b needs a cloud` | failed / failed | 2s / 2s | absent | - | absent | - |",
		"- `b needs a cloud`: containerd-2.4 failed directly, failed through the shim: no cloud here.",
		// A reason shared by backends is written once.
		"- `e needs a cloud`: containerd-1.6 and containerd-1.7 failed directly, failed through the shim: no cloud here.",
		"- `c`: containerd-2.4 skipped directly, skipped through the shim: skipped by the spec: Only supported for providers [gce].",
	} {
		if !strings.Contains(table, want+"\n") {
			t.Errorf("table:\n%s\nwant the line %q", table, want)
		}
	}

	// Unexplained and broken specs are rendered, and are an error.
	table, err = Markdown([]Backend{{"containerd-2.4", Pair(
		[]Result{pass("a"), fail("d")}, []Result{fail("a"), fail("d")})}}, reasons)
	if err == nil || !strings.Contains(err.Error(), "a passes directly, not through the shim") || !strings.Contains(err.Error(), "d is failed directly with no reason (boom)") {
		t.Errorf("err = %v, want the broken spec a and the unexplained spec d", err)
	}
	if !strings.Contains(table, "failed / failed | 2s / 2s |\n") || !strings.Contains(table, "passed / failed **broken**") || !strings.Contains(table, "**parity broken for 1**") {
		t.Errorf("table:\n%s\nwant d, and a marked broken", table)
	}
}
