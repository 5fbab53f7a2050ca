package namespaces

import "testing"

func TestUnescapeMountinfo(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/tmp/nst-1/root", "/tmp/nst-1/root"},
		{`/tmp/a\040b`, "/tmp/a b"},
		{`/tmp/a\134b`, `/tmp/a\b`},
		{`/tmp/a\04`, `/tmp/a\04`},
		{`/tmp/a\089`, `/tmp/a\089`},
	} {
		if got := UnescapeMountinfo(tc.in); got != tc.want {
			t.Errorf("UnescapeMountinfo(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
