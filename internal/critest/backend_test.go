package critest

import "testing"

func TestBackendLabel(t *testing.T) {
	for _, tc := range []struct {
		desc, out, want string
	}{
		{"Debian's 1.6", "containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1\n", "containerd-1.6"},
		{"upstream 2.1", "containerd github.com/containerd/containerd/v2 v2.1.4 75cb2b7\n", "containerd-2.1"},
		{"no version", "containerd: unknown\n", ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, err := backendLabel([]byte(tc.out))
			if tc.want == "" {
				if err == nil {
					t.Errorf("backendLabel(%q) = %q, want an error", tc.out, got)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("backendLabel(%q) = %q, %v; want %q", tc.out, got, err, tc.want)
			}
		})
	}
}
