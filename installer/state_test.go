package installer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/cri-nstarget/cri-nstarget/installer/hostfs"
)

// TestStateFileOfBefore: a state file written by an installer from before
// the table (the phase and the kubeletEdited/kubeletRestored flags,
// previousSHA256) loads as the phase that means the same: the kubelet to
// put back exactly when it was edited and not restored.
func TestStateFileOfBefore(t *testing.T) {
	for _, c := range []struct {
		file string
		want Phase
	}{
		{`{"phase":"rolling-back","kubeletEdited":true,"reason":"r"}`, PhaseRollBackKubelet},
		{`{"phase":"rolling-back","kubeletEdited":true,"kubeletRestored":true,"reason":"r"}`, PhaseRollBackShim},
		{`{"phase":"rolling-back","reason":"r"}`, PhaseRollBackShim},
		{`{"phase":"removing","kubeletEdited":true}`, PhaseRemoveKubelet},
		{`{"phase":"removing","kubeletEdited":true,"kubeletRestored":true}`, PhaseRemoveShim},
		{`{"phase":"removing"}`, PhaseRemoveShim},
		{`{"phase":"files"}`, PhaseFiles},
		{`{"phase":"kubelet","kubeletEdited":true,"kubeletPID":7}`, PhaseKubelet},
		{`{"phase":"done","kubeletEdited":true}`, PhaseDone},
		{`{"phase":"upgrading","kubeletEdited":true,"previousSHA256":"a","nextSHA256":"b"}`, PhaseUpgrading},
		{`{"phase":"rolled-back","failedSHA256":"f"}`, PhaseRolledBack},
	} {
		root := t.TempDir()
		p := hostfs.Path(root, StatePath)
		if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		st, err := loadState(root)
		if err != nil || st.Phase != c.want {
			t.Errorf("%s: phase %q %v, want %q", c.file, st.Phase, err, c.want)
		}
	}
}

// oldState is the state file as an installer from before the table reads
// it: the fields its decisions used.
type oldState struct {
	Phase           Phase  `json:"phase"`
	KubeletEdited   bool   `json:"kubeletEdited"`
	KubeletRestored bool   `json:"kubeletRestored"`
	Reason          string `json:"reason"`
	Failed          string `json:"failedSHA256"`
	Next            string `json:"nextSHA256"`
}

// TestStateFileForBefore: each phase is written as an installer from
// before the table reads it (a DaemonSet rolled back to one): a phase it
// knows, with the kubelet to be put back exactly when this installer would
// put it back; and read back by this one as the same phase.
func TestStateFileForBefore(t *testing.T) {
	for p, want := range map[Phase]oldState{
		PhaseFiles:            {Phase: "files"},
		PhaseShim:             {Phase: "shim"},
		PhaseKubelet:          {Phase: "kubelet", KubeletEdited: true},
		PhaseKubeletRestarted: {Phase: "kubelet-restarted", KubeletEdited: true},
		PhaseDone:             {Phase: "done", KubeletEdited: true, Failed: "f"},
		PhaseUpgrading:        {Phase: "upgrading", KubeletEdited: true, Failed: "f", Next: "n"},
		PhaseRollBackKubelet:  {Phase: "rolling-back", KubeletEdited: true, Reason: "r", Failed: "f"},
		PhaseRollBackShim:     {Phase: "rolling-back", Reason: "r", Failed: "f"},
		PhaseRolledBack:       {Phase: "rolled-back", Reason: "r", Failed: "f"},
		PhaseRemoveKubelet:    {Phase: "removing", KubeletEdited: true},
		PhaseRemoveShim:       {Phase: "removing"},
	} {
		st := State{Phase: p, Reason: want.Reason, Failed: want.Failed, Next: want.Next}
		b, err := json.Marshal(st)
		if err != nil {
			t.Fatal(err)
		}
		var old oldState
		if err := json.Unmarshal(b, &old); err != nil || old != want {
			t.Errorf("%s: written %s, read before as %+v %v, want %+v", p, b, old, err, want)
		}
		var back State
		if err := json.Unmarshal(b, &back); err != nil || !reflect.DeepEqual(back, st) {
			t.Errorf("%s: written %s, read back as %+v %v", p, b, back, err)
		}
	}
}
