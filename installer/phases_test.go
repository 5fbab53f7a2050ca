package installer

import (
	"errors"
	"strings"
	"testing"
)

// allPhases are every phase there is; persisted, those written to the
// state file.
var allPhases = []Phase{PhaseNew, PhaseFiles, PhaseShim, PhaseKubelet, PhaseKubeletRestarted, PhaseDone, PhaseUpgrading,
	PhaseRollBackKubelet, PhaseRollBackShim, PhaseRolledBack, PhaseRemoveKubelet, PhaseRemoveShim, PhaseRemoved}

func persisted(p Phase) bool { return p != PhaseNew && p != PhaseRemoved }

// TestTable walks the table: the install's rows lead from PhaseNew to
// PhaseDone, each with a step; every phase with anything of the install's
// on the node can be removed, and every phase of an install under way or
// done rolled back, by undo rows that each have a step and end at
// PhaseRemoved or PhaseRolledBack.
func TestTable(t *testing.T) {
	for p := range rows {
		if !contains(allPhases, p) {
			t.Errorf("the table has %q, which allPhases has not", p)
		}
	}
	if n := walkRows(t, PhaseNew, PhaseDone); n != 5 {
		t.Errorf("the install takes %d steps from nothing, want 5", n)
	}
	for _, p := range allPhases {
		r, ok := rows[p]
		if !ok && p != PhaseRemoved {
			t.Errorf("%q has no row", p)
		}
		if persisted(p) && r.remove == "" {
			t.Errorf("%q has no removal", p)
		}
		if r.remove != "" {
			walkRows(t, r.remove, PhaseRemoved)
		}
		rollsBack := contains([]Phase{PhaseFiles, PhaseShim, PhaseKubelet, PhaseKubeletRestarted, PhaseDone, PhaseUpgrading, PhaseRollBackKubelet, PhaseRollBackShim}, p)
		if rollsBack != (r.rollback != "") {
			t.Errorf("%q: rollback %q", p, r.rollback)
		}
		if r.rollback != "" {
			walkRows(t, r.rollback, PhaseRolledBack)
		}
		// The kubelet is put back by an undo from exactly the phases
		// after its edit may have been written.
		edited := contains([]Phase{PhaseKubelet, PhaseKubeletRestarted, PhaseDone, PhaseUpgrading, PhaseRollBackKubelet, PhaseRemoveKubelet}, p)
		if persisted(p) && edited != (r.remove == PhaseRemoveKubelet) {
			t.Errorf("%q: removal starts at %q", p, r.remove)
		}
		if r.rollback != "" && edited != (r.rollback == PhaseRollBackKubelet) {
			t.Errorf("%q: rollback starts at %q", p, r.rollback)
		}
	}
}

// walkRows follows the rows' next from p to end, each with a step, and
// says how many it took.
func walkRows(t *testing.T, p, end Phase) int {
	t.Helper()
	n := 0
	for ; p != end; n++ {
		r := rows[p]
		if r.step == nil || n > len(rows) {
			t.Errorf("from %q, no way to %q", p, end)
			return n
		}
		p = r.next
	}
	return n
}

func contains(ps []Phase, p Phase) bool {
	for _, q := range ps {
		if q == p {
			return true
		}
	}
	return false
}

// TestKilledAtEachPhase: for every phase written to the state file, the
// installer is killed right after writing it (in the first scenario of
// TestKilledAnywhere that reaches it), and started again: the state on the
// host says that phase, and the run resumes or reverts to the scenario's
// end state.
func TestKilledAtEachPhase(t *testing.T) {
	type at struct {
		sc scenario
		k  int
	}
	reached := map[Phase]at{}
	for _, sc := range scenarios() {
		n := newNode(t, "kubeadm-flags")
		if sc.setup != nil {
			sc.setup(n)
		}
		k := 0
		_ = sc.run(n, func(p string) bool {
			if strings.HasPrefix(p, "state:") {
				if ph := n.state().Phase; reached[ph].sc.run == nil {
					reached[ph] = at{sc, k}
				}
			}
			k++
			return false
		})
	}
	for _, p := range allPhases {
		if !persisted(p) {
			continue
		}
		t.Run(string(p), func(t *testing.T) {
			t.Parallel()
			a, ok := reached[p]
			if !ok {
				t.Fatalf("no scenario writes %q", p)
			}
			n := newNode(t, "kubeadm-flags")
			if a.sc.setup != nil {
				a.sc.setup(n)
			}
			i := 0
			if err := a.sc.run(n, func(string) bool { i++; return i == a.k+1 }); !errors.Is(err, errCrash) {
				t.Fatalf("%s: not killed: %v", a.sc.name, err)
			}
			if got := n.state().Phase; got != p {
				t.Fatalf("%s: killed after writing %q, the state says %q", a.sc.name, p, got)
			}
			a.sc.check(t, n, a.sc.run(n, nil))
		})
	}
}
