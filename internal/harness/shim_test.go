package harness

import (
	"os"
	"regexp"
	"testing"
)

// The tests build the shim with the Makefile's tags, named there once.
func TestShimTagsAreTheMakefiles(t *testing.T) {
	b, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^SHIM_TAGS\s*:=\s*(\S+)\s*$`).FindSubmatch(b)
	if m == nil || string(m[1]) != ShimTags {
		t.Errorf("the Makefile's SHIM_TAGS is %q, ShimTags %q", m, ShimTags)
	}
}
