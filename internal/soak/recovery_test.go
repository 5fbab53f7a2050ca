package soak

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestRunnersReady(t *testing.T) {
	st := func(name string, ready bool) corev1.ContainerStatus {
		return corev1.ContainerStatus{Name: name, Ready: ready}
	}
	for _, tc := range []struct {
		desc string
		sts  []corev1.ContainerStatus
		want bool
	}{
		{"no status yet", nil, false},
		{"runners ready, target crash-looping", []corev1.ContainerStatus{st("crash", false), st("keeper", true)}, true},
		{"a runner not ready", []corev1.ContainerStatus{st("app", true), st("side", false)}, false},
		{"only the target", []corev1.ContainerStatus{st("done", false)}, false},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := &corev1.Pod{Status: corev1.PodStatus{ContainerStatuses: tc.sts}}
			if got := runnersReady(p); got != tc.want {
				t.Errorf("runnersReady = %v, want %v", got, tc.want)
			}
		})
	}
}
