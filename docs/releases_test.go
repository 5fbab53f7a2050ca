package docs

import (
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cri-nstarget/cri-nstarget/support"
)

// RELEASES.md's containerd table is package support's window, row by row
// (cri-nstarget check judges nodes by the package, operators read the file).
func TestReleasesWindow(t *testing.T) {
	rows := table(t, "../RELEASES.md", "### containerd")
	if len(rows) != len(support.Containerd) {
		t.Errorf("RELEASES.md, ### containerd: %d rows, package support has %d lines", len(rows), len(support.Containerd))
	}
	for i, l := range support.Containerd {
		if i >= len(rows) {
			break
		}
		want := []string{l.Minor, l.Upstream, l.Status.String(), l.Path}
		if !slices.Equal(rows[i], want) {
			t.Errorf("RELEASES.md, ### containerd, row %d: %q; package support says %q", i+1, rows[i], want)
		}
	}
	var current []string
	for _, r := range table(t, "../RELEASES.md", "### Per release") {
		if strings.Contains(r[0], "(Unreleased)") {
			current = r
		}
	}
	k := strings.Join(support.Kubernetes, ", ")
	if len(current) < 3 || current[1] != support.Window() || !strings.HasPrefix(current[2], k) {
		t.Errorf("RELEASES.md, ### Per release, the Unreleased row: %q; want containerd %q, Kubernetes %q", current, support.Window(), k)
	}
	if p := paragraph(t, "../RELEASES.md", "### Kubernetes"); !strings.HasPrefix(p, "Kubernetes "+strings.Join(support.Kubernetes[:len(support.Kubernetes)-1], ", ")+" and "+support.Kubernetes[len(support.Kubernetes)-1]+":") {
		t.Errorf("RELEASES.md, ### Kubernetes: %q; want it to name %q", p, support.Kubernetes)
	}
}

// What CI tests (the Makefile's BACKENDS, each with its kubelet) is inside
// the window: no backend outside it, and the kubelets are its Kubernetes
// minors.
func TestBackendsInWindow(t *testing.T) {
	var kubelets []string
	for _, b := range makefileBackends(t) {
		if _, ok := support.LineOf(b.containerd); !ok {
			t.Errorf("Makefile: backend containerd %s is outside package support's window (%s)", b.containerd, support.Window())
		}
		if m := minor(b.kubelet); !slices.Contains(kubelets, m) {
			kubelets = append(kubelets, m)
		}
	}
	want := slices.Clone(support.Kubernetes)
	sort.Strings(kubelets)
	sort.Strings(want)
	if !slices.Equal(kubelets, want) {
		t.Errorf("Makefile: the backends' kubelets are %q; package support's Kubernetes minors %q", kubelets, want)
	}
}

// paragraph is the first paragraph under the heading line `heading` in
// file, joined into one line.
func paragraph(t *testing.T, file, heading string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "\n"+heading+"\n")
	if !ok {
		t.Fatalf("%s: no %q", file, heading)
	}
	p, _, _ := strings.Cut(after, "\n\n")
	return strings.Join(strings.Fields(p), " ")
}
