package installer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/cri-nstarget/cri-nstarget/installer/hostfs"
	"github.com/cri-nstarget/cri-nstarget/installer/kubelet"
)

// Paths on the host.
const (
	StateDir  = "/var/lib/cri-nstarget-install"
	StatePath = StateDir + "/state.json"
	// previousShim is the binary an upgrade replaced, until the new one
	// is healthy; previousUnit the unit file.
	previousShim = StateDir + "/cri-nstarget.previous"
	previousUnit = StateDir + "/cri-nstarget.service.previous"

	UnitName       = "cri-nstarget.service"
	UnitPath       = "/etc/systemd/system/" + UnitName
	ConfigPath     = "/etc/cri-nstarget/config.toml"
	KubeconfigPath = "/etc/cri-nstarget/events.kubeconfig"
)

// State is what the installer keeps on the host, in StatePath.
type State struct {
	Phase Phase `json:"phase"`
	// Version is the installed shim's version, ShimSHA its binary's sha256.
	Version string `json:"version,omitempty"`
	ShimSHA string `json:"shimSHA256,omitempty"`
	// Created are the files this installer made, as it wrote them.
	Created []Created `json:"created,omitempty"`
	// Socket is the shim's endpoint (its config's listen) and StateDir its
	// state_dir; Backend the kubelet's endpoint before (containerd).
	Socket  string        `json:"socket,omitempty"`
	ShimRun string        `json:"shimStateDir,omitempty"`
	Backend string        `json:"backend,omitempty"`
	Kubelet *kubelet.Edit `json:"kubelet,omitempty"`
	// KubeletPID is the kubelet that ran before the restart onto the shim,
	// asked at RestartedAt; it must be Ready through the shim by Deadline.
	KubeletPID  int       `json:"kubeletPID,omitempty"`
	RestartedAt time.Time `json:"restartedAt,omitzero"`
	Deadline    time.Time `json:"deadline,omitzero"`
	// Reason is why the install was rolled back (or an upgrade failed);
	// Failed the sha256 of the binary that failed, not tried again here.
	Reason string `json:"reason,omitempty"`
	Failed string `json:"failedSHA256,omitempty"`
	// Next is the sha256 of the binary an upgrade puts in place, which
	// answered its trial.
	Next string `json:"nextSHA256,omitempty"`
}

// The state file as installers before the table wrote it, and as they
// read it (a DaemonSet rolled back to one): the phase "rolling-back" or
// "removing", with kubeletEdited (the kubelet's edit may have been
// written) and kubeletRestored (it was undone) saying whether the kubelet
// is still to be put back, and previousSHA256 (never read). Each of this
// installer's phases is written as the old phase and flags that mean it
// (onDisk), and read back from them (fromDisk): the same file for both.
const (
	diskRollingBack Phase = "rolling-back"
	diskRemoving    Phase = "removing"
)

// legacyFlags are the flags of the old state file.
type legacyFlags struct {
	KubeletEdited   bool `json:"kubeletEdited,omitempty"`
	KubeletRestored bool `json:"kubeletRestored,omitempty"`
}

// onDisk is the phase written for p, and whether the kubelet's edit is
// to be undone (kubeletEdited) when the install is.
func (p Phase) onDisk() (Phase, bool) {
	switch p {
	case PhaseRollBackKubelet:
		return diskRollingBack, true
	case PhaseRollBackShim:
		return diskRollingBack, false
	case PhaseRemoveKubelet:
		return diskRemoving, true
	case PhaseRemoveShim:
		return diskRemoving, false
	}
	return p, rows[p].rollback == PhaseRollBackKubelet
}

// fromDisk is the phase an old state file's phase and flags mean.
func fromDisk(p Phase, f legacyFlags) Phase {
	restore := f.KubeletEdited && !f.KubeletRestored
	switch {
	case p == diskRollingBack && restore:
		return PhaseRollBackKubelet
	case p == diskRollingBack:
		return PhaseRollBackShim
	case p == diskRemoving && restore:
		return PhaseRemoveKubelet
	case p == diskRemoving:
		return PhaseRemoveShim
	}
	return p
}

// stateJSON is State without its methods.
type stateJSON State

// MarshalJSON writes st as the old state file says the same (onDisk).
func (st State) MarshalJSON() ([]byte, error) {
	phase, edited := st.Phase.onDisk()
	return json.Marshal(struct {
		Phase Phase `json:"phase"`
		stateJSON
		legacyFlags
	}{phase, stateJSON(st), legacyFlags{KubeletEdited: edited}})
}

// UnmarshalJSON reads a state file of this installer or of one before it.
func (st *State) UnmarshalJSON(b []byte) error {
	var f struct {
		stateJSON
		legacyFlags
	}
	if err := json.Unmarshal(b, &f); err != nil {
		return err
	}
	*st = State(f.stateJSON)
	st.Phase = fromDisk(st.Phase, f.legacyFlags)
	return nil
}

// Created is a file the installer made on the host, with the sha256 of what
// it wrote, or a directory it made for one (removed when empty).
type Created struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256,omitempty"`
	Dir    bool   `json:"dir,omitempty"`
}

// loadState reads the state file; none is the zero State.
func loadState(root string) (State, error) {
	b, err := os.ReadFile(hostfs.Path(root, StatePath))
	if errors.Is(err, fs.ErrNotExist) {
		return State{}, nil
	}
	if err != nil {
		return State{}, fmt.Errorf("read the install's state: %w", err)
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, fmt.Errorf("read the install's state %s: %w", StatePath, err)
	}
	return st, nil
}

func saveState(root string, st State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := writeFile(root, StatePath, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("save the install's state: %w", err)
	}
	return nil
}
