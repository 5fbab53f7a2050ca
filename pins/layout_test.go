package pins

import "testing"

// TestContainerOf: a path below <state>/pins/<id> is that container's; the
// pins' directory itself, or a path beside it, is no container's.
func TestContainerOf(t *testing.T) {
	for _, c := range []struct {
		path, id string
		ok       bool
	}{
		{"/run/nst/pins/abc/pid", "abc", true},
		{"/run/nst/pins/abc", "abc", true},
		{"/run/nst/pins/abc/", "abc", true},
		{"/run/nst/pins", "", false},
		{"/run/nst/pinsx/abc/pid", "", false},
		{"/run/nst/intents/abc", "", false},
		{"/run/nst", "", false},
		{"/elsewhere/pins/abc/pid", "", false},
	} {
		id, ok := ContainerOf("/run/nst", c.path)
		if id != c.id || ok != c.ok {
			t.Errorf("ContainerOf(%q) = %q %v, want %q %v", c.path, id, ok, c.id, c.ok)
		}
	}
	if got := Under("/run/nst"); got != "/run/nst/pins" {
		t.Errorf("Under = %q", got)
	}
}
