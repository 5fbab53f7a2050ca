// Package deploy_test checks the cluster install's manifests (deploy/) for
// what they may not ask (deploy.LeastPrivilege: the installer's pod
// unprivileged, with only the host paths and capabilities listed there,
// tolerating only what a node being set up carries; no long-lived token);
// its Node writes kept to its own Node by the admission policy (shown on a
// real apiserver by admission_test.go, build tag apiserver).
package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/cri-nstarget/cri-nstarget/deploy"
)

// objects reads the objects of every resource of dir's kustomization, as
// written (no transformation applied; hack/chart's test builds it with
// kustomize).
func objects(t *testing.T, dir string) []deploy.Object {
	t.Helper()
	var k struct{ Resources []string }
	readYAML(t, filepath.Join(dir, "kustomization.yaml"), &k)
	var out []deploy.Object
	for _, r := range k.Resources {
		b, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := deploy.Split(r, b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, objs...)
	}
	return out
}

func readYAML(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestLeastPrivilege: the install asks for no more than deploy's lists
// (privilege.go).
func TestLeastPrivilege(t *testing.T) {
	objs := objects(t, "install")
	if len(objs) < 10 {
		t.Fatalf("%d objects in install/: the manifests were not read", len(objs))
	}
	for _, err := range deploy.LeastPrivilege(objs) {
		t.Error(err)
	}
}

// TestCleanup: the cleanup is the same install with the installer's mode
// changed, and nothing else (its privileges are the install's).
func TestCleanup(t *testing.T) {
	var k struct {
		Resources []string
		Patches   []struct {
			Target struct{ Kind, Name string }
			Patch  string
		}
	}
	readYAML(t, filepath.Join("cleanup", "kustomization.yaml"), &k)
	if !slices.Equal(k.Resources, []string{"../install"}) || len(k.Patches) != 1 {
		t.Fatalf("cleanup/kustomization.yaml: resources %v, %d patches", k.Resources, len(k.Patches))
	}
	var ops []struct{ Op, Path, Value string }
	if err := yaml.UnmarshalStrict([]byte(k.Patches[0].Patch), &ops); err != nil {
		t.Fatal(err)
	}
	if len(ops) != 1 || ops[0].Path != "/spec/template/spec/containers/0/args/0" || ops[0].Value != "cleanup" {
		t.Errorf("the cleanup patches %+v, want the mode alone", ops)
	}
}
