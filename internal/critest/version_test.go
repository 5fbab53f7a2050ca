package critest

import (
	"path/filepath"
	"regexp"
	"testing"
)

func TestVersion(t *testing.T) {
	if v := Version(filepath.Join("..", "..", GoMod)); !regexp.MustCompile(`^v1\.\d+\.\d+$`).MatchString(v) {
		t.Errorf("critest version %q from %s", v, GoMod)
	}
	if v := Version("nonexistent/go.mod"); v != "" {
		t.Errorf("version %q of no file", v)
	}
}
