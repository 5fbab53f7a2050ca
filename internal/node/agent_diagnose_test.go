package node

import (
	"strings"
	"testing"
)

// TestDiagnose: what an exec of /bin/sh needs, as the agent sees it.
func TestDiagnose(t *testing.T) {
	d := diagnose()
	for _, want := range []string{"readlink /proc/self/ns/mnt: \"mnt:[", "stat /bin/sh: ", "mountinfo: ", "kernel: "} {
		if !strings.Contains(d, want) {
			t.Errorf("no %q in:\n%s", want, d)
		}
	}
	t.Logf("\n%s", d)
}
