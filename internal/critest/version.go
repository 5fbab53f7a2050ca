package critest

import (
	"os"

	"golang.org/x/mod/modfile"
)

// GoMod is the module that builds critest, relative to the repository root,
// and the one place its version is named.
const GoMod = "hack/critest/go.mod"

// Version is the cri-tools version the module file at path requires, or
// "" where it cannot be read.
func Version(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	f, err := modfile.Parse(path, b, nil)
	if err != nil {
		return ""
	}
	for _, r := range f.Require {
		if r.Mod.Path == "sigs.k8s.io/cri-tools" {
			return r.Mod.Version
		}
	}
	return ""
}
