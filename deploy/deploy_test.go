// Package deploy_test checks the cluster install's manifests (deploy/) for
// what they may not ask: the installer's pod unprivileged, with only the
// host paths and capabilities listed here, tolerating only what a node
// being set up carries; no long-lived token; its Node writes kept to its
// own Node by the admission policy (shown on a real apiserver by
// admission_test.go, build tag apiserver).
package deploy_test

import (
	"bytes"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"sigs.k8s.io/yaml"
)

// hostPaths are the host paths the installer may mount (each at
// /host/<path>), and whether read-only; docs/cluster-install.md says why.
var hostPaths = map[string]bool{
	"/usr/local/bin":          false,
	"/etc":                    false,
	"/var/lib":                false,
	"/run":                    false,
	"/var/run":                true,
	"/usr/lib/systemd/system": true,
	"/lib/systemd/system":     true,
	"/proc":                   true,
}

// capabilities the installer's container may add: none
// (installer/mounts: the pins are released by systemd).
var capabilities []corev1.Capability

// tolerated are the taints of a node being set up.
var tolerated = []string{
	"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "node.kubernetes.io/network-unavailable",
	"node.kubernetes.io/disk-pressure", "node.kubernetes.io/memory-pressure", "node.kubernetes.io/pid-pressure",
	"node.kubernetes.io/unschedulable", "node.cloudprovider.kubernetes.io/uninitialized",
}

// object is one document of the manifests.
type object struct {
	file string
	kind string
	raw  []byte
}

// objects reads the documents of every resource of dir's kustomization.
func objects(t *testing.T, dir string) []object {
	t.Helper()
	var k struct{ Resources []string }
	readYAML(t, filepath.Join(dir, "kustomization.yaml"), &k)
	var out []object
	for _, r := range k.Resources {
		b, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range bytes.Split(b, []byte("\n---\n")) {
			var meta struct{ Kind string }
			if err := yaml.Unmarshal(doc, &meta); err != nil {
				t.Fatalf("%s: %v", r, err)
			}
			if meta.Kind != "" {
				out = append(out, object{r, meta.Kind, doc})
			}
		}
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

func decode[T any](t *testing.T, o object) T {
	t.Helper()
	var v T
	if err := yaml.UnmarshalStrict(o.raw, &v); err != nil {
		t.Fatalf("%s (%s): %v", o.file, o.kind, err)
	}
	return v
}

func only[T any](t *testing.T, objs []object, kind string) T {
	t.Helper()
	var found []object
	for _, o := range objs {
		if o.kind == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d objects of kind %s, want 1", len(found), kind)
	}
	return decode[T](t, found[0])
}

// TestLeastPrivilege: the rendered install asks for no more than the
// lists above.
func TestLeastPrivilege(t *testing.T) {
	objs := objects(t, "install")
	for _, o := range objs {
		if o.kind == "Secret" && decode[corev1.Secret](t, o).Type == corev1.SecretTypeServiceAccountToken {
			t.Errorf("%s: a Secret of type %s (a token that never expires)", o.file, corev1.SecretTypeServiceAccountToken)
		}
	}
	ds := only[appsv1.DaemonSet](t, objs, "DaemonSet")
	spec := ds.Spec.Template.Spec
	if spec.HostPID || spec.HostIPC {
		t.Errorf("hostPID %v, hostIPC %v: want neither", spec.HostPID, spec.HostIPC)
	}
	if spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken is false: the installer's identity is its projected token")
	}
	checkVolumes(t, spec)
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		checkContainer(t, c)
	}
	checkTolerations(t, spec.Tolerations)

	pc := only[schedulingv1.PriorityClass](t, objs, "PriorityClass")
	if spec.PriorityClassName != pc.Name || strings.HasPrefix(spec.PriorityClassName, "system-") {
		t.Errorf("priorityClassName %q, want the install's own (%q)", spec.PriorityClassName, pc.Name)
	}
	if pc.Value > 1000000000 {
		t.Errorf("PriorityClass value %d: above what a class outside the system ones may have", pc.Value)
	}

	policy := only[admissionv1.ValidatingAdmissionPolicy](t, objs, "ValidatingAdmissionPolicy")
	binding := only[admissionv1.ValidatingAdmissionPolicyBinding](t, objs, "ValidatingAdmissionPolicyBinding")
	if binding.Spec.PolicyName != policy.Name || !slices.Contains(binding.Spec.ValidationActions, admissionv1.Deny) {
		t.Errorf("the binding %+v does not deny with the policy %s", binding.Spec, policy.Name)
	}
	if sa := "system:serviceaccount:" + ds.Namespace + ":" + spec.ServiceAccountName; len(policy.Spec.MatchConditions) != 1 ||
		!strings.Contains(policy.Spec.MatchConditions[0].Expression, "'"+sa+"'") {
		t.Errorf("the policy does not match the installer's service account %s: %+v", sa, policy.Spec.MatchConditions)
	}
}

func checkVolumes(t *testing.T, spec corev1.PodSpec) {
	t.Helper()
	hostVolumes := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		p := path.Clean(v.HostPath.Path)
		ro, listed := hostPaths[p]
		switch {
		case p == "/":
			t.Errorf("volume %s: the host's root", v.Name)
		case !listed:
			t.Errorf("volume %s: host path %s is not one the installer needs", v.Name, p)
		}
		hostVolumes[v.Name] = p
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			for _, m := range c.VolumeMounts {
				if m.Name != v.Name {
					continue
				}
				if m.MountPath != path.Join("/host", p) || m.SubPath != "" {
					t.Errorf("%s mounts %s at %s (subPath %q): want /host%s, where installer/hostfs finds it", c.Name, p, m.MountPath, m.SubPath, p)
				}
				if ro && !m.ReadOnly {
					t.Errorf("%s mounts %s read-write: the installer only reads it", c.Name, p)
				}
				if m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional {
					t.Errorf("%s mounts %s with Bidirectional propagation (privileged only)", c.Name, p)
				}
			}
		}
	}
	for p := range hostPaths {
		if !slices.Contains(slices.Collect(mapValues(hostVolumes)), p) {
			t.Errorf("host path %s is listed here but not mounted: the list is stale", p)
		}
	}
}

func mapValues(m map[string]string) func(func(string) bool) {
	return func(yield func(string) bool) {
		for _, v := range m {
			if !yield(v) {
				return
			}
		}
	}
}

func checkContainer(t *testing.T, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	if sc == nil {
		t.Fatalf("container %s has no securityContext", c.Name)
	}
	if sc.Privileged != nil && *sc.Privileged {
		t.Errorf("container %s is privileged", c.Name)
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("container %s: allowPrivilegeEscalation is not false", c.Name)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("container %s: readOnlyRootFilesystem is not true", c.Name)
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		t.Errorf("container %s: runAsUser is not 0 (what it touches on the host is root's)", c.Name)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("container %s: seccompProfile is not RuntimeDefault", c.Name)
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container %s: capabilities do not drop ALL", c.Name)
	} else {
		for _, add := range sc.Capabilities.Add {
			if !slices.Contains(capabilities, corev1.Capability(strings.TrimPrefix(string(add), "CAP_"))) {
				t.Errorf("container %s adds %s, which the installer does not use", c.Name, add)
			}
		}
	}
}

func checkTolerations(t *testing.T, tolerations []corev1.Toleration) {
	t.Helper()
	for _, tol := range tolerations {
		if tol.Key == "" {
			t.Errorf("toleration %+v tolerates every taint", tol)
		} else if !slices.Contains(tolerated, tol.Key) {
			t.Errorf("toleration of %s: not a taint of a node being set up", tol.Key)
		}
	}
	for _, key := range tolerated {
		if !slices.ContainsFunc(tolerations, func(tol corev1.Toleration) bool { return tol.Key == key }) {
			t.Errorf("no toleration of %s: the installer must run on a node that carries it", key)
		}
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
