package installer

import (
	"context"
	"fmt"
)

// Phase is the step an install (or its undoing) has reached on the host.
// Each phase is a row of the table rows: the step taken from it, the phase
// that step ends at, and where an undoing of the install starts from it.
type Phase string

const (
	// PhaseNew: nothing of this installer's on the node.
	PhaseNew Phase = ""
	// PhaseFiles: the shim's files are being written (those in Created may
	// exist), then its unit started.
	PhaseFiles Phase = "files"
	// PhaseShim: the shim runs and is healthy; the kubelet is untouched.
	PhaseShim Phase = "shim"
	// PhaseKubelet: the kubelet's edit may be written; KubeletPID is the
	// kubelet that ran before.
	PhaseKubelet Phase = "kubelet"
	// PhaseKubeletRestarted: the kubelet's restart was asked at
	// RestartedAt; it must be Ready through the shim by Deadline.
	PhaseKubeletRestarted Phase = "kubelet-restarted"
	// PhaseDone: installed (Failed, when set: a version whose upgrade did
	// not take here, not tried again).
	PhaseDone Phase = "done"
	// PhaseUpgrading: the binary is being replaced by another version
	// (Next), which answered a trial; Version and ShimSHA are still the
	// one before's.
	PhaseUpgrading Phase = "upgrading"
	// PhaseRollBackKubelet: the install is being undone after a failure
	// (Reason), and the kubelet is to be put back on Backend first;
	// PhaseRollBackShim: the kubelet is there, the shim is to be removed;
	// PhaseRolledBack: the install was undone.
	PhaseRollBackKubelet Phase = "rolling-back-kubelet"
	PhaseRollBackShim    Phase = "rolling-back-shim"
	PhaseRolledBack      Phase = "rolled-back"
	// PhaseRemoveKubelet and PhaseRemoveShim: the cleanup mode is undoing
	// the install, the kubelet first; PhaseRemoved: it did, and the state
	// file goes (never written).
	PhaseRemoveKubelet Phase = "removing-kubelet"
	PhaseRemoveShim    Phase = "removing-shim"
	PhaseRemoved       Phase = "removed"
)

// row is a phase's entry in the table.
type row struct {
	// step is what is done from the phase. It ends at next, saved (or
	// held in st, for the last step of an undo), or it returns an error:
	// a *Failure when it rolled the install back, or one that leaves the
	// state where the next installer resumes (a kill, a slot not had).
	step func(in *Installer, ctx context.Context, st *State) error
	// resume, when set, is done first when a run starts at the phase (a
	// state file left by an installer that stopped there).
	resume func(in *Installer, ctx context.Context, st *State) error
	next   Phase
	// rollback and remove are the phases where undoing the install from
	// this phase starts: with the kubelet to put back, or only the shim.
	rollback, remove Phase
}

// rows is the install's table. Install walks it from the phase on record
// to PhaseDone (upgrades run from PhaseDone, in upgrade.go); a rollback
// and a removal walk their own rows to PhaseRolledBack and PhaseRemoved.
var rows map[Phase]row

func init() {
	rows = map[Phase]row{
		PhaseNew: {step: (*Installer).begin, next: PhaseFiles},
		PhaseFiles: {step: (*Installer).putShim, resume: (*Installer).reinspect, next: PhaseShim,
			rollback: PhaseRollBackShim, remove: PhaseRemoveShim},
		PhaseShim: {step: (*Installer).recordKubelet, resume: (*Installer).recheckShim, next: PhaseKubelet,
			rollback: PhaseRollBackShim, remove: PhaseRemoveShim},
		PhaseKubelet: {step: (*Installer).restartOnShim, next: PhaseKubeletRestarted,
			rollback: PhaseRollBackKubelet, remove: PhaseRemoveKubelet},
		PhaseKubeletRestarted: {step: (*Installer).confirm, resume: (*Installer).resumeRestarted, next: PhaseDone,
			rollback: PhaseRollBackKubelet, remove: PhaseRemoveKubelet},
		PhaseDone:      {rollback: PhaseRollBackKubelet, remove: PhaseRemoveKubelet},
		PhaseUpgrading: {rollback: PhaseRollBackKubelet, remove: PhaseRemoveKubelet},

		PhaseRollBackKubelet: {step: (*Installer).putKubeletBack, next: PhaseRollBackShim,
			rollback: PhaseRollBackKubelet, remove: PhaseRemoveKubelet},
		PhaseRollBackShim: {step: (*Installer).takeShimOff, next: PhaseRolledBack,
			rollback: PhaseRollBackShim, remove: PhaseRemoveShim},
		PhaseRolledBack:    {remove: PhaseRemoveShim},
		PhaseRemoveKubelet: {step: (*Installer).putKubeletBack, next: PhaseRemoveShim, remove: PhaseRemoveKubelet},
		PhaseRemoveShim:    {step: (*Installer).takeShimOff, next: PhaseRemoved, remove: PhaseRemoveShim},
	}
}

// walk takes the steps of the table from st's phase until end, first the
// phase's resume when resumed. It returns the first error.
func (in *Installer) walk(ctx context.Context, st *State, resumed bool, end Phase) error {
	for st.Phase != end {
		r, ok := rows[st.Phase]
		if !ok || r.step == nil {
			return fmt.Errorf("the install's state says %q, which this installer has no step for", st.Phase)
		}
		if resumed && r.resume != nil {
			if err := r.resume(in, ctx, st); err != nil {
				return err
			}
		}
		resumed = false
		from := st.Phase
		if err := r.step(in, ctx, st); err != nil {
			return err
		}
		if st.Phase != r.next {
			return fmt.Errorf("the step from %q ended at %q, not %q", from, st.Phase, r.next)
		}
	}
	return nil
}
