//go:build failpoints

package server

import (
	"os"
	"path/filepath"
)

// FailpointEnv names the step at which a shim built with the tag failpoints
// stops for good: it writes the file FailpointEnv's value names in
// FailpointDirEnv's directory, then blocks, so that a test can kill it
// there. Steps: create:recorded (the intent record is written, nothing
// forwarded), create:nri-event (containerd's NRI event for the container is
// being answered: the backend waits inside its CreateContainer),
// create:forwarded (the backend made the container), and create:finished
// (spec and pins done, the record still there).
const (
	FailpointEnv    = "CRI_NSTARGET_FAILPOINT"
	FailpointDirEnv = "CRI_NSTARGET_FAILPOINT_DIR"
)

func failpoint(step string) {
	if os.Getenv(FailpointEnv) != step {
		return
	}
	if dir := os.Getenv(FailpointDirEnv); dir != "" {
		os.WriteFile(filepath.Join(dir, "failpoint-reached"), []byte(step), 0o600)
	}
	select {}
}
