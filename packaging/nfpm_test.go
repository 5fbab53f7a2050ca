// Package packaging holds the nfpm configurations of the .deb and .rpm
// (hack/release.sh builds them; hack/release-check.sh installs them). Its
// test holds their metadata to what a node needs: cri-nstarget runs in front
// of whatever containerd the node has, packaged or not.
package packaging

import (
	"os"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// relations are the package relationships nfpm writes, at the top of its
// config or in a packager's overrides.
type relations struct {
	Depends    []string `yaml:"depends"`
	PreDepends []string `yaml:"predepends"`
	Recommends []string `yaml:"recommends"`
	Suggests   []string `yaml:"suggests"`
}

type nfpmConfig struct {
	relations `yaml:",inline"`
	Overrides map[string]relations `yaml:"overrides"`
	Deb       struct {
		relations `yaml:",inline"`
	} `yaml:"deb"`
}

func load(t *testing.T, file string) nfpmConfig {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var c nfpmConfig
	if err := yaml.Unmarshal(b, &c); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return c
}

// mentions says which of rels names containerd (or containerd.io).
func mentions(rels []string) []string {
	var out []string
	for _, r := range rels {
		if strings.Contains(r, "containerd") {
			out = append(out, r)
		}
	}
	return out
}

// Where containerd came from its release tarball there is no containerd
// package, and where it came from Docker there is containerd.io: neither a
// Depends nor a Recommends (which apt and dnf install by default) may name
// containerd, in either package format. A suggestion may.
func TestNoContainerdDependency(t *testing.T) {
	c := load(t, "nfpm.yaml")
	all := map[string]relations{"(all packagers)": c.relations, "deb:": c.Deb.relations}
	for name, r := range c.Overrides {
		all["overrides."+name] = r
	}
	for where, r := range all {
		for kind, rels := range map[string][]string{"depends": r.Depends, "predepends": r.PreDepends, "recommends": r.Recommends} {
			if m := mentions(rels); len(m) > 0 {
				t.Errorf("nfpm.yaml, %s %s: %q: a node with containerd from its tarball or containerd.io has no such package (suggest it instead)", where, kind, m)
			}
		}
	}
	for _, p := range []string{"deb", "rpm"} {
		if m := mentions(c.Overrides[p].Suggests); len(m) != 1 || !strings.Contains(m[0], "containerd.io") {
			t.Errorf("nfpm.yaml, overrides.%s suggests %q: want containerd, or containerd.io, suggested", p, c.Overrides[p].Suggests)
		}
	}
}

// The TARGET suite's package depends on nothing: it runs against any CRI.
func TestSuiteDependsOnNothing(t *testing.T) {
	c := load(t, "nfpm-conformance.yaml")
	if len(c.Depends)+len(c.Recommends)+len(c.Overrides["deb"].Depends)+len(c.Overrides["rpm"].Depends) > 0 {
		t.Errorf("nfpm-conformance.yaml: depends %q, recommends %q: want none", c.Depends, c.Recommends)
	}
}
