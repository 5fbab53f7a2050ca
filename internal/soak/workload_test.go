package soak

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// Every pod has a PID namespace per container, and every container prints
// its namespace first; the runners are the containers that never exit.
func TestPodFor(t *testing.T) {
	for _, tc := range []struct {
		kind    podKind
		names   []string
		restart corev1.RestartPolicy
	}{
		{kindRun, []string{"app", "side"}, corev1.RestartPolicyAlways},
		{kindCrash, []string{"crash", "keeper"}, corev1.RestartPolicyAlways},
		{kindExit, []string{"done", "keeper"}, corev1.RestartPolicyOnFailure},
	} {
		t.Run(tc.kind.String(), func(t *testing.T) {
			p := podFor("p", tc.kind, "img")
			if s := p.Spec.ShareProcessNamespace; s == nil || *s {
				t.Errorf("shareProcessNamespace = %v, want false", s)
			}
			if p.Spec.RestartPolicy != tc.restart {
				t.Errorf("restartPolicy %s, want %s", p.Spec.RestartPolicy, tc.restart)
			}
			var names []string
			runs := 0
			for _, c := range p.Spec.Containers {
				names = append(names, c.Name)
				if script := c.Command[len(c.Command)-1]; !strings.HasPrefix(script, printNS) {
					t.Errorf("%s does not print its PID namespace first: %q", c.Name, script)
				}
				if runners[c.Name] {
					runs++
				}
			}
			if strings.Join(names, ",") != strings.Join(tc.names, ",") || runs != 1 && tc.kind != kindRun {
				t.Errorf("containers %v (%d runners), want %v", names, runs, tc.names)
			}
		})
	}
	ec := debugContainer("dbg-1", "app", "img")
	if ec.TargetContainerName != "app" || !strings.HasPrefix(ec.Command[2], printNS) || !strings.Contains(ec.Command[2], "/proc/1/root") {
		t.Errorf("debug container %+v", ec)
	}
}
