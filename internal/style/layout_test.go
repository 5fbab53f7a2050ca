package style_test

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestCmdNamesWhatShips: in cmd/, a command named cri-nstarget* ships (it
// is one of products) and one named nstarget-* is a developer tool
// (docs/design.md, The map of the code), so the name alone tells them apart.
func TestCmdNamesWhatShips(t *testing.T) {
	entries, err := os.ReadDir("../../cmd")
	if err != nil {
		t.Fatal(err)
	}
	var shipped []string
	for _, e := range entries {
		switch name := e.Name(); {
		case strings.HasPrefix(name, "cri-nstarget"):
			shipped = append(shipped, "./cmd/"+name)
		case !strings.HasPrefix(name, "nstarget-"):
			t.Errorf("cmd/%s: a command is cri-nstarget* (it ships) or nstarget-* (a developer tool)", name)
		}
	}
	if want := slices.Sorted(slices.Values(products)); !slices.Equal(shipped, want) {
		t.Errorf("cmd/ ships %v by their names, the products are %v", shipped, want)
	}
}

// TestProductImportsNoLab: no package the shipped commands import is under
// internal/ (the lab: test rig, soak, fixtures) or is a developer tool.
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
		if strings.Contains(p+"/", "/internal/") || strings.Contains(p, "/cmd/nstarget-") {
			t.Errorf("the product imports %s, which is the lab's", p)
		}
	}
}
