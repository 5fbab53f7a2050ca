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

// Phase is the step an install (or its undoing) has reached on the host.
type Phase string

const (
	// PhaseFiles: the shim's files are being written (those in Created may
	// exist), then its unit started.
	PhaseFiles Phase = "files"
	// PhaseShim: the shim runs and is healthy; the kubelet is untouched.
	PhaseShim Phase = "shim"
	// PhaseKubelet: the kubelet's edit may be written (KubeletEdited);
	// KubeletPID is the kubelet that ran before.
	PhaseKubelet Phase = "kubelet"
	// PhaseKubeletRestarted: the kubelet's restart was asked at
	// RestartedAt; it must be Ready through the shim by Deadline.
	PhaseKubeletRestarted Phase = "kubelet-restarted"
	// PhaseDone: installed.
	PhaseDone Phase = "done"
	// PhaseUpgrading: the binary is being replaced by another version
	// (Next), which answered a trial; Version and ShimSHA are still the
	// one before's.
	PhaseUpgrading Phase = "upgrading"
	// PhaseRollingBack: the install is being undone after a failure
	// (Reason); PhaseRolledBack: it was.
	PhaseRollingBack Phase = "rolling-back"
	PhaseRolledBack  Phase = "rolled-back"
	// PhaseRemoving: the cleanup mode is undoing the install.
	PhaseRemoving Phase = "removing"
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
	// KubeletEdited: the edit may have been written; KubeletRestored: it
	// was undone and the kubelet restarted and Ready on Backend.
	KubeletEdited   bool      `json:"kubeletEdited,omitempty"`
	KubeletRestored bool      `json:"kubeletRestored,omitempty"`
	KubeletPID      int       `json:"kubeletPID,omitempty"`
	RestartedAt     time.Time `json:"restartedAt,omitzero"`
	Deadline        time.Time `json:"deadline,omitzero"`
	// Reason is why the install was rolled back (or an upgrade failed);
	// Failed the sha256 of the binary that failed, not tried again here.
	Reason string `json:"reason,omitempty"`
	Failed string `json:"failedSHA256,omitempty"`
	// Previous is the sha256 of the binary an upgrade is replacing, Next
	// that of the binary it puts in place, which answered its trial.
	Previous string `json:"previousSHA256,omitempty"`
	Next     string `json:"nextSHA256,omitempty"`
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
