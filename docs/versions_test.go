// Package docs holds the user documents. Its test holds the tables of
// supported versions in README.md and docs/operations.md, SECURITY.md's
// supported line, README's test command, docs/testing.md's legs and every
// leg named in the documents to the Makefile, the one place each version is
// named: a backend added, dropped or moved to another runc or kubelet there
// fails here until the documents say the same.
package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// backend is one row of the Makefile's table of backends.
type backend struct {
	containerd, runc, kubelet string // full versions, "2.4.2"
}

func minor(v string) string {
	parts := strings.SplitN(v, ".", 3)
	return parts[0] + "." + parts[1]
}

// makefileVars reads the Makefile's variables, as first assigned.
func makefileVars(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile("../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]string{}
	assign := regexp.MustCompile(`^([A-Z0-9_]+)\s*[?:]?=\s*(.*?)\s*$`)
	for _, line := range strings.Split(string(b), "\n") {
		if m := assign.FindStringSubmatch(line); m != nil {
			if _, ok := vars[m[1]]; !ok {
				vars[m[1]] = m[2]
			}
		}
	}
	return vars
}

// makefileBackends reads the supported backends (BACKENDS) and their
// versions from the Makefile's variables.
func makefileBackends(t *testing.T) []backend {
	t.Helper()
	vars := makefileVars(t)
	// $(NAME) references, as make expands them (one level is all the table uses).
	expand := func(v string) string {
		if m := regexp.MustCompile(`^\$\(([A-Z0-9_]+)\)$`).FindStringSubmatch(v); m != nil {
			return vars[m[1]]
		}
		return v
	}
	var out []backend
	for _, name := range strings.Fields(vars["BACKENDS"]) {
		key := strings.ReplaceAll(name, ".", "")
		be := backend{
			containerd: strings.TrimPrefix(expand(vars["CONTAINERD_"+key]), "v"),
			runc:       strings.TrimPrefix(expand(vars["RUNC_"+key]), "v"),
			kubelet:    strings.TrimPrefix(expand(vars["KUBELET_"+key]), "v"),
		}
		if be.containerd == "" || be.runc == "" || be.kubelet == "" {
			t.Fatalf("Makefile: backend %s lacks a version: %+v", name, be)
		}
		out = append(out, be)
	}
	if len(out) == 0 {
		t.Fatal("Makefile: no BACKENDS")
	}
	return out
}

// table returns the rows (cells trimmed) of the first table under the
// heading line `heading` in file.
func table(t *testing.T, file, heading string) [][]string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var rows [][]string
	in, started := false, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == heading:
			in = true
		case !in:
		case strings.HasPrefix(line, "|"):
			started = true
			cells := strings.Split(strings.Trim(line, "|"), "|")
			for i := range cells {
				cells[i] = strings.TrimSpace(cells[i])
			}
			if !strings.HasPrefix(cells[0], "---") {
				rows = append(rows, cells)
			}
		case started:
			return rows[1:] // without the header
		}
	}
	if !started {
		t.Fatalf("%s: no table under %q", file, heading)
	}
	return rows[1:]
}

func TestSupportedVersions(t *testing.T) {
	backends := makefileBackends(t)
	for _, doc := range []struct {
		file, heading string
		first         func(backend) string // what the containerd cell starts with
	}{
		{"../README.md", "### Supported versions", func(b backend) string { return minor(b.containerd) }},
		{"operations.md", "### Supported versions", func(b backend) string {
			return minor(b.containerd) + " (tested: " + b.containerd + ")"
		}},
	} {
		rows := table(t, doc.file, doc.heading)
		if len(rows) != len(backends) {
			t.Errorf("%s, %s: %d rows, the Makefile's BACKENDS has %d", doc.file, doc.heading, len(rows), len(backends))
		}
		for i, b := range backends {
			if i >= len(rows) {
				break
			}
			r := rows[i]
			if len(r) < 3 || !strings.HasPrefix(r[0], doc.first(b)) || r[1] != minor(b.runc) || r[2] != minor(b.kubelet) {
				t.Errorf("%s, %s, row %d: %q; the Makefile says containerd %s, runc %s, kubelet %s (want %q | %s | %s)",
					doc.file, doc.heading, i+1, r, b.containerd, b.runc, b.kubelet, doc.first(b), minor(b.runc), minor(b.kubelet))
			}
		}
	}
}

// minors are the containerd minors of backends, in order ("2.4 2.3 2.0").
func minors(backends []backend) string {
	var m []string
	for _, b := range backends {
		m = append(m, minor(b.containerd))
	}
	return strings.Join(m, " ")
}

// listed is the containerd minors named in the text of file between the
// first occurrence of before and the next occurrence of after, in order.
func listed(t *testing.T, file, before, after string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(strings.Join(strings.Fields(string(b)), " "), before)
	if !ok {
		t.Fatalf("%s: no %q", file, before)
	}
	text, _, ok := strings.Cut(rest, after)
	if !ok {
		t.Fatalf("%s: no %q after %q", file, after, before)
	}
	return strings.Join(regexp.MustCompile(`\b\d+\.\d+\b`).FindAllString(text, -1), " ")
}

// The supported containerd releases as the prose names them: SECURITY.md's
// supported line, README's test command, and docs/testing.md's legs, which
// also give each backend's full containerd, runc and kubelet versions.
func TestSupportedVersionsNamed(t *testing.T) {
	backends := makefileBackends(t)
	want := minors(backends)
	for _, c := range []struct{ file, before, after string }{
		{"../SECURITY.md", "the containerd releases upstream still supports (", " today"},
		{"../README.md", "make test # every test, on containerd", " with their kubelets"},
	} {
		if got := listed(t, c.file, c.before, c.after); got != want {
			t.Errorf("%s names containerd %q after %q; the Makefile's BACKENDS: %q", c.file, got, c.before, want)
		}
	}
	b, err := os.ReadFile("testing.md")
	if err != nil {
		t.Fatal(err)
	}
	_, legs, _ := strings.Cut(string(b), "## The legs of `make test`")
	legs, _, _ = strings.Cut(legs, "|")
	legs = strings.Join(strings.Fields(legs), " ")
	for _, be := range backends {
		for _, v := range []string{be.containerd + " ", be.runc, be.kubelet} {
			if !strings.Contains(legs, v) {
				t.Errorf("docs/testing.md, The legs of `make test`: %q missing (the Makefile's backend %s: containerd %s, runc %s, kubelet %s)",
					v, minor(be.containerd), be.containerd, be.runc, be.kubelet)
			}
		}
	}
}

// Every leg the documents name (integration-containerd-2.4, ...) is one the
// Makefile defines: its backend is in BACKENDS or MATRIX_BACKENDS. The
// reports (docs/reports/) are dated evidence and may name legs since gone.
func TestLegNames(t *testing.T) {
	vars := makefileVars(t)
	defined := map[string]bool{}
	for _, b := range strings.Fields(vars["BACKENDS"] + " " + vars["MATRIX_BACKENDS"]) {
		defined[b] = true
	}
	files, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, "../README.md", "../SECURITY.md", "cri-nstarget.8", "nstarget-conformance.8")
	leg := regexp.MustCompile(`\b(?:integration|conformance|e2e|e2e-upstream)-containerd-(\d+\.\d+)\b`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range leg.FindAllStringSubmatch(string(b), -1) {
			if !defined[m[1]] {
				t.Errorf("%s names %s; the Makefile has no backend %s (BACKENDS %q, MATRIX_BACKENDS %q)", f, m[0], m[1], vars["BACKENDS"], vars["MATRIX_BACKENDS"])
			}
		}
	}
}
