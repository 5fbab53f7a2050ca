package support

import (
	"fmt"
	"testing"
)

func TestLineOf(t *testing.T) {
	for _, tc := range []struct {
		version string
		minor   string
		status  Status
		ok      bool
	}{
		{"v2.4.2", "2.4", Supported, true},
		{"2.3.7", "2.3", Supported, true},
		{"v2.0.7", "2.0", Supported, true},
		{"1.7.35-1", "1.7", BestEffort, true},
		{"v1.7.0-rc.1", "1.7", BestEffort, true},
		{"1.6.20~ds1-1", "", Unsupported, false},
		{"v2.1.4", "", Unsupported, false},
		{"garbage", "", Unsupported, false},
		{"", "", Unsupported, false},
	} {
		l, ok := LineOf(tc.version)
		if ok != tc.ok || l.Minor != tc.minor || l.Status != tc.status {
			t.Errorf("LineOf(%q) = %+v, %v; want minor %q, %v, %v", tc.version, l, ok, tc.minor, tc.status, tc.ok)
		}
	}
}

func TestWindow(t *testing.T) {
	if got, want := Window(), "2.4, 2.3, 2.0 (1.7 best effort)"; got != want {
		t.Errorf("Window() = %q, want %q", got, want)
	}
}

// The lines are newest first, each once, each with its upstream status
// and path said.
func TestContainerdOrdered(t *testing.T) {
	seen := map[string]bool{}
	prev := ""
	for _, l := range Containerd {
		if seen[l.Minor] || l.Upstream == "" || l.Path == "" || l.Status == Unsupported {
			t.Errorf("line %+v: twice, or without its upstream status, path or support", l)
		}
		seen[l.Minor] = true
		if prev != "" && !newer(prev, l.Minor) {
			t.Errorf("%s comes after %s: want newest first", l.Minor, prev)
		}
		prev = l.Minor
	}
}

func newer(a, b string) bool {
	var am, an, bm, bn int
	fmt.Sscanf(a, "%d.%d", &am, &an)
	fmt.Sscanf(b, "%d.%d", &bm, &bn)
	return am > bm || am == bm && an > bn
}

func TestKubernetesPlace(t *testing.T) {
	for _, tc := range []struct {
		version string
		minor   string
		place   Place
		err     bool
	}{
		{"v1.37.0", "1.37", Inside, false},
		{"v1.36.4+k3s1", "1.36", Inside, false},
		{"1.35.2-gke.100", "1.35", Inside, false},
		{"v1.38.0-rc.1", "1.38", Newer, false},
		{"v2.0.0", "2.0", Newer, false},
		{"v1.34.9", "1.34", Older, false},
		{"v1.9.0", "1.9", Older, false},
		{"Kubernetes", "", Older, true},
	} {
		m, p, err := KubernetesPlace(tc.version)
		if m != tc.minor || p != tc.place || (err != nil) != tc.err {
			t.Errorf("KubernetesPlace(%q) = %q, %v, %v; want %q, %v, error %v", tc.version, m, p, err, tc.minor, tc.place, tc.err)
		}
	}
}
