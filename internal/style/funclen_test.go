package style_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// maxLines bounds a product function (issue 51: a function a reader holds
// whole), from its declaration to its closing brace.
const maxLines = 60

// products are the commands that ship; every package of this module they
// import is product code.
var products = []string{"./cmd/cri-nstarget", "./cmd/cri-nstarget-install"}

// TestFunctionLength: no function of the product (the shipped commands and
// every package of this module they import, tests aside) is over maxLines
// lines.
func TestFunctionLength(t *testing.T) {
	args := append([]string{"list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}|{{join .GoFiles \",\"}}{{end}}{{end}}"}, products...)
	cmd := exec.Command("go", args...)
	cmd.Dir = "../.."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	fs := token.NewFileSet()
	var checked int
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		dir, files, ok := strings.Cut(line, "|")
		if !ok || files == "" {
			continue
		}
		for _, name := range strings.Split(files, ",") {
			path := filepath.Join(dir, name)
			f, err := parser.ParseFile(fs, path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fd, ok := d.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				checked++
				if n := fs.Position(fd.End()).Line - fs.Position(fd.Pos()).Line + 1; n > maxLines {
					t.Errorf("%s: %s is %d lines, over %d", fs.Position(fd.Pos()), fd.Name.Name, n, maxLines)
				}
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d functions checked: go list found no product packages?", checked)
	}
	t.Logf("%d functions of %v and the packages they import", checked, products)
}
