package claims

import (
	"encoding/json"
	"fmt"
	"regexp"
)

// ownPIDPath is the PID namespace path containerd 2.2+ writes itself for
// a TARGET container: its target's init's.
var ownPIDPath = regexp.MustCompile(`^/proc/[1-9][0-9]*/ns/pid$`)

// Pinned tells whether path, the PID namespace of a TARGET container's
// spec, is not containerd's own /proc/<pid>/ns/pid: in the plugin mode,
// the plugin's pin, its answer to the create.
func Pinned(path string) bool { return path != "" && !ownPIDPath.MatchString(path) }

// SpecNamespace is the path of the kind namespace ("pid") in the OCI spec
// containerd reports in a verbose ContainerStatus's info (its "info" key:
// {"runtimeSpec": ...}); "" when the spec has that namespace without a
// path.
func SpecNamespace(info map[string]string, kind string) (string, error) {
	raw, ok := info["info"]
	if !ok {
		return "", fmt.Errorf("the verbose status has no \"info\" (keys: %d): not containerd's", len(info))
	}
	var v struct {
		RuntimeSpec *struct {
			Linux *struct {
				Namespaces []struct{ Type, Path string }
			}
		} `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(raw), &v); err != nil {
		return "", fmt.Errorf("the verbose status's info: %w", err)
	}
	if v.RuntimeSpec == nil || v.RuntimeSpec.Linux == nil {
		return "", fmt.Errorf("the verbose status's info has no runtimeSpec.linux")
	}
	for _, n := range v.RuntimeSpec.Linux.Namespaces {
		if n.Type == kind {
			return n.Path, nil
		}
	}
	return "", fmt.Errorf("the spec has no %s namespace", kind)
}
