package pins

import (
	"path/filepath"
	"strings"
)

// The layout of the pins in a state dir (the config's state_dir), which the
// proxy makes and the installer and the lab read:
// <state dir>/pins/<container id>/<kind>, one directory per container.

// Under is the pins' directory of the state dir stateDir.
func Under(stateDir string) string { return filepath.Join(stateDir, "pins") }

// ContainerOf is the container whose pins path is in (its pin directory,
// or a pin in it), in the state dir stateDir; ok is false for a path that
// is not below the pins' directory.
func ContainerOf(stateDir, path string) (id string, ok bool) {
	rel, err := filepath.Rel(Under(stateDir), path)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, "../") || filepath.IsAbs(rel) {
		return "", false
	}
	id, _, _ = strings.Cut(rel, "/")
	return id, id != ""
}
