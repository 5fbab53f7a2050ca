package harness

import "testing"

func TestUnescapeMountPath(t *testing.T) {
	tests := []struct{ in, want string }{
		{"/tmp/nst-1/root", "/tmp/nst-1/root"},
		{`/tmp/a\040b`, "/tmp/a b"},
		{`/tmp/a\134b`, `/tmp/a\b`},
		{`/tmp/a\04`, `/tmp/a\04`},
	}
	for _, tc := range tests {
		if got := unescapeMountPath(tc.in); got != tc.want {
			t.Errorf("unescapeMountPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestMountsUnder(t *testing.T) {
	got, err := MountsUnder("/proc")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[len(got)-1] != "/proc" {
		t.Errorf("MountsUnder(/proc) = %v, want /proc last", got)
	}
	if got, err := MountsUnder(t.TempDir()); err != nil || len(got) != 0 {
		t.Errorf("MountsUnder(empty temp dir) = %v, %v", got, err)
	}
}
