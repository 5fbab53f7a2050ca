package main

import "testing"

func TestSameSocket(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want bool
	}{
		{"unix:///run/containerd/containerd.sock", "/run/containerd/containerd.sock", true},
		{"unix:///run/containerd/containerd.sock", "unix:///run/containerd/containerd.sock", true},
		{"/run/containerd//containerd.sock", "/run/containerd/./containerd.sock", true},
		{"unix:///run/containerd/containerd.sock", "/run/other/containerd.sock", false},
		{"unix:///run/containerd/containerd.sock", "/run/containerd/containerd.sock.ttrpc", false},
	} {
		if got := sameSocket(c.a, c.b); got != c.want {
			t.Errorf("sameSocket(%q, %q) = %v, want %v", c.a, c.b, got, c.want)
		}
	}
}
