package style_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestCmdHoldsWhatShips: cmd/ holds the shipped commands (products) and
// nothing else; a developer tool goes under internal/cmd/ (docs/design.md,
// The map of the code).
func TestCmdHoldsWhatShips(t *testing.T) {
	entries, err := os.ReadDir("../../cmd")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, "./cmd/"+e.Name())
	}
	if want := slices.Sorted(slices.Values(products)); !slices.Equal(got, want) {
		t.Errorf("cmd/ holds %v, want only the shipped commands %v: a tool that does not ship goes under internal/cmd/", got, want)
	}
}

// TestProductImportsNoLab: no package the shipped commands import is under
// internal/, the lab's (test rig, soak, tools).
func TestProductImportsNoLab(t *testing.T) {
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.ImportPath}}{{end}}{{end}}"}, products...)...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := strings.Fields(string(out))
	if len(pkgs) < 10 {
		t.Fatalf("go list found %d packages of the product: %v", len(pkgs), pkgs)
	}
	for _, p := range pkgs {
		if strings.Contains(p+"/", "/internal/") {
			t.Errorf("the product imports %s, which is the lab's", p)
		}
	}
}
