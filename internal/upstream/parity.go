package upstream

import (
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one spec of the parity table: its results directly against
// containerd and through the shim (State "" where that run had no such
// spec).
type Row struct {
	Spec         string
	Direct, Shim Result
}

// Broken reports whether the spec passed directly but not through the
// shim: the one outcome parity forbids.
func (r Row) Broken() bool { return r.Direct.Passed() && !r.Shim.Passed() }

// Pair joins the two runs' results by spec, in spec order.
func Pair(direct, shim []Result) []Row {
	rows := map[string]*Row{}
	row := func(spec string) *Row {
		if rows[spec] == nil {
			rows[spec] = &Row{Spec: spec}
		}
		return rows[spec]
	}
	for _, r := range direct {
		row(r.Spec).Direct = r
	}
	for _, r := range shim {
		row(r.Spec).Shim = r
	}
	out := make([]Row, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Spec < out[j].Spec })
	return out
}

// Table renders rows under a title line (the backend): spec, the state
// directly, through the shim, and the two times; then a line saying whether
// parity holds.
func Table(title string, rows []Row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", title)
	w := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(w, "spec\tdirect\tshim\ttime (direct / shim)")
	broken := 0
	for _, r := range rows {
		mark := ""
		if r.Broken() {
			mark, broken = "  <- parity broken", broken+1
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s / %s%s\n", r.Spec, state(r.Direct), state(r.Shim), seconds(r.Direct), seconds(r.Shim), mark)
	}
	w.Flush()
	if broken == 0 {
		fmt.Fprintf(&b, "parity: holds (%d specs)\n", len(rows))
	} else {
		fmt.Fprintf(&b, "parity: BROKEN for %d of %d specs\n", broken, len(rows))
	}
	return b.String()
}

func state(r Result) string {
	if r.State == "" {
		return "absent"
	}
	return r.State
}

func seconds(r Result) string {
	if r.State == "" {
		return "-"
	}
	return r.Time.Round(100 * time.Millisecond).String()
}
