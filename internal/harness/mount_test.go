package harness

import "testing"

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
