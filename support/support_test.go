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
