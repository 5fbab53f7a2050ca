package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/cri-nstarget/cri-nstarget/pins"
)

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestReasonsDocumented: every reason the targeting metric can carry
// (server/reasons.go's reasonKind constants) is named in operations.md, so
// that a dashboard's label has its meaning there.
func TestReasonsDocumented(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "../server/reasons.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "reasonKind" {
				continue
			}
			for _, v := range vs.Values {
				if lit, ok := v.(*ast.BasicLit); ok {
					s, _ := strconv.Unquote(lit.Value)
					reasons = append(reasons, s)
				}
			}
		}
	}
	if len(reasons) < 10 {
		t.Fatalf("found %d reasonKind constants in server/reasons.go (%v): the test no longer reads them", len(reasons), reasons)
	}
	ops := read(t, "operations.md")
	for _, r := range reasons {
		if !strings.Contains(ops, "`"+r+"`") {
			t.Errorf("the metric's reason %q (server/reasons.go) is not in docs/operations.md", r)
		}
	}
}

// TestEventTables: each Events table shown in README.md and operations.md is
// laid out as kubectl describe lays it out (k8s.io/kubectl's DescribeEvents:
// a tabwriter of minwidth 0, tabwidth 8, padding 2; the columns Type, Reason,
// Age, From, Message), and no message carries the fieldPath, which describe
// does not print.
func TestEventTables(t *testing.T) {
	header := regexp.MustCompile(`^( *)Events:$`)
	cells := regexp.MustCompile(`^(\S+)  +(\S+)  +(\S+(?: \(x\d+ over \S+\))?)  +(\S+)  +(.*)$`)
	tables := 0
	for _, path := range []string{"../README.md", "operations.md"} {
		lines := strings.Split(read(t, path), "\n")
		for i := 0; i < len(lines); i++ {
			m := header.FindStringSubmatch(lines[i])
			if m == nil || i+2 >= len(lines) {
				continue
			}
			indent := m[1]
			var b strings.Builder
			w := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
			w.Write([]byte("Events:\n  Type\tReason\tAge\tFrom\tMessage\n  ----\t------\t----\t----\t-------\n"))
			j := i + 3
			for ; j < len(lines) && strings.HasPrefix(lines[j], indent+"  ") && strings.TrimSpace(lines[j]) != ""; j++ {
				c := cells.FindStringSubmatch(strings.TrimPrefix(lines[j], indent+"  "))
				if c == nil {
					t.Errorf("%s:%d: not a row of Type, Reason, Age, From, Message: %q", path, j+1, lines[j])
					continue
				}
				if strings.HasPrefix(c[5], "spec.") {
					t.Errorf("%s:%d: the message starts with a fieldPath, which kubectl describe does not print: %q", path, j+1, c[5])
				}
				w.Write([]byte("  " + strings.Join(c[1:], "\t") + "\n"))
			}
			w.Flush()
			want := strings.TrimSuffix(b.String(), "\n")
			have := strings.Join(lines[i:j], "\n")
			if indent != "" {
				want = indent + strings.ReplaceAll(want, "\n", "\n"+indent)
			}
			if have != want {
				t.Errorf("%s:%d: the Events table is not laid out as kubectl describe lays it out:\n%s\nwant:\n%s", path, i+1, have, want)
			}
			tables++
			i = j
		}
	}
	if tables < 3 {
		t.Errorf("found %d Events tables in README.md and operations.md: the test no longer finds them", tables)
	}
}

// TestOperationsLinks: every link into operations.md, and every section of
// it named in quotes ("operations.md, \"Upgrade\""), names a section it has.
func TestOperationsLinks(t *testing.T) {
	anchors := map[string]bool{}
	titles := map[string]bool{}
	for _, l := range strings.Split(read(t, "operations.md"), "\n") {
		if title, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " "); ok && strings.HasPrefix(l, "#") {
			titles[title] = true
			anchors[slug(title)] = true
		}
	}
	link := regexp.MustCompile(`\((?:docs/)?operations\.md#([^)\s]+)\)|\(#([^)\s]+)\)`)
	quoted := regexp.MustCompile(`operations\.md\)?, "([^"]+)"`)
	files, _ := filepath.Glob("*.md")
	files = append(files, "../README.md", "../SECURITY.md")
	for _, path := range files {
		doc := read(t, path)
		for _, m := range link.FindAllStringSubmatch(doc, -1) {
			if m[2] != "" && path != "operations.md" {
				continue // a link within another document
			}
			if a := m[1] + m[2]; !anchors[a] {
				t.Errorf("%s links operations.md#%s, which has no such section", path, a)
			}
		}
		for _, m := range quoted.FindAllStringSubmatch(doc, -1) {
			if !titles[m[1]] {
				t.Errorf("%s names operations.md's %q, which has no such section", path, m[1])
			}
		}
	}
}

// slug is GitHub's anchor of a heading: lower case, spaces to hyphens, and
// nothing but what slugKeeps (letters, digits, hyphens, underscores).
func slug(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case slugKeeps(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestStateFilesDocumented: every file or directory the shim makes in its
// state dir (server's filepath.Join(opts.StateDir, NAME), and the pins'
// directory, pins.Under(opts.StateDir)) is in operations.md's table of what
// it writes and in the man page's FILES.
func TestStateFilesDocumented(t *testing.T) {
	join := regexp.MustCompile(`filepath\.Join\(opts\.StateDir, "([^"]+)"\)`)
	var names []string
	srcs, _ := filepath.Glob("../server/*.go")
	for _, src := range srcs {
		if !strings.HasSuffix(src, "_test.go") {
			text := read(t, src)
			for _, m := range join.FindAllStringSubmatch(text, -1) {
				names = append(names, m[1])
			}
			if strings.Contains(text, "pins.Under(opts.StateDir)") {
				names = append(names, filepath.Base(pins.Under("")))
			}
		}
	}
	if len(names) < 3 {
		t.Fatalf("found %v in server/*.go: the test no longer finds what the shim makes in its state dir", names)
	}
	ops, man := read(t, "operations.md"), read(t, "cri-nstarget.8")
	_, written, _ := strings.Cut(ops, "### What the shim writes and mounts on the node")
	written, _, _ = strings.Cut(written, "\n## ")
	_, files, _ := strings.Cut(man, ".SH FILES")
	files, _, _ = strings.Cut(files, ".SH EXIT STATUS")
	for _, n := range names {
		if !strings.Contains(written, "`/run/cri-nstarget/"+n) {
			t.Errorf("the shim writes %s in its state dir (server/), but operations.md's \"What the shim writes\" does not list it", n)
		}
		if !strings.Contains(files, "/run/cri-nstarget/"+n) {
			t.Errorf("the shim writes %s in its state dir (server/), but the man page's FILES does not list it", n)
		}
	}
}
