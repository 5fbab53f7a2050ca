// Package deploy_test checks the cluster install's manifests (deploy/) for
// what they may not ask (deploy.LeastPrivilege: the installer's pod
// unprivileged, with only the host paths and capabilities listed there,
// tolerating only what a node being set up carries; no long-lived token);
// its Node writes kept to its own Node by the admission policy (shown on a
// real apiserver by admission_test.go, build tag apiserver); and the
// plugin mode's pod (deploy/plugin) for what deploy.PluginLeastPrivilege
// finds, and that it finds each privilege added.
package deploy_test

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

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

// TestPluginLeastPrivilege: the plugin mode's pod (deploy/plugin) asks for
// no more than deploy's lists (plugin_privilege.go).
func TestPluginLeastPrivilege(t *testing.T) {
	objs := objects(t, "plugin")
	if len(objs) < 6 {
		t.Fatalf("%d objects in plugin/: the manifests were not read", len(objs))
	}
	for _, err := range deploy.PluginLeastPrivilege(objs) {
		t.Error(err)
	}
}

// TestPluginLeastPrivilegeRefuses: each privilege added to deploy/plugin
// is found.
func TestPluginLeastPrivilegeRefuses(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		change func(ds *appsv1.DaemonSet, c *corev1.Container)
		extra  string // another object
		want   string
	}{
		{desc: "the host's network", change: func(ds *appsv1.DaemonSet, _ *corev1.Container) { ds.Spec.Template.Spec.HostNetwork = true },
			want: "hostNetwork true"},
		{desc: "a capability", change: func(_ *appsv1.DaemonSet, c *corev1.Container) {
			c.SecurityContext.Capabilities.Add = append(c.SecurityContext.Capabilities.Add, "NET_ADMIN")
		}, want: "adds NET_ADMIN, which the plugin does not use"},
		{desc: "privileged", change: func(_ *appsv1.DaemonSet, c *corev1.Container) {
			yes := true
			c.SecurityContext.Privileged = &yes
		}, want: "container plugin is privileged"},
		{desc: "the state dir Bidirectional", change: func(_ *appsv1.DaemonSet, c *corev1.Container) {
			bidi := corev1.MountPropagationBidirectional
			c.VolumeMounts[0].MountPropagation = &bidi
		}, want: "mounts /run/cri-nstarget-plugin with Bidirectional propagation"},
		{desc: "the state dir on the host", change: func(ds *appsv1.DaemonSet, _ *corev1.Container) {
			ds.Spec.Template.Spec.Volumes[0].VolumeSource = corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/run/cri-nstarget-plugin"}}
		}, want: "host path /run/cri-nstarget-plugin is not one the plugin needs"},
		{desc: "containerd's dir writable", change: func(_ *appsv1.DaemonSet, c *corev1.Container) { c.VolumeMounts[2].ReadOnly = false },
			want: "mounts /run/containerd at /run/containerd (subPath \"\", read-only false"},
		{desc: "the host's root", change: func(ds *appsv1.DaemonSet, c *corev1.Container) {
			ds.Spec.Template.Spec.Volumes = append(ds.Spec.Template.Spec.Volumes, corev1.Volume{Name: "root",
				VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "root", MountPath: "/host"})
		}, want: "host path / is not one the plugin needs"},
		{desc: "NRI's socket writable", change: func(_ *appsv1.DaemonSet, c *corev1.Container) { c.VolumeMounts[1].ReadOnly = false },
			want: "mounts /var/run/nri at /var/run/nri (subPath \"\", read-only false"},
		{desc: "the token automounted", change: func(ds *appsv1.DaemonSet, _ *corev1.Container) {
			ds.Spec.Template.Spec.AutomountServiceAccountToken = nil
		}, want: "automounts its token"},
		{desc: "a token of a day", change: func(ds *appsv1.DaemonSet, _ *corev1.Container) {
			day := int64(86400)
			ds.Spec.Template.Spec.Volumes[3].Projected.Sources[0].ServiceAccountToken.ExpirationSeconds = &day
		}, want: "a token expiring after"},
		{desc: "a writable root", change: func(_ *appsv1.DaemonSet, c *corev1.Container) {
			c.SecurityContext.ReadOnlyRootFilesystem = nil
		}, want: "readOnlyRootFilesystem is not true"},
		{desc: "no memory limit", change: func(_ *appsv1.DaemonSet, c *corev1.Container) { c.Resources.Limits = nil },
			want: "memory limit"},
		{desc: "every node", change: func(ds *appsv1.DaemonSet, _ *corev1.Container) {
			delete(ds.Spec.Template.Spec.NodeSelector, "cri-nstarget.io/plugin")
		}, want: "want cri-nstarget.io/plugin=true"},
		{desc: "secrets read", extra: "kind: ClusterRole\nmetadata: {name: more}\nrules:\n- apiGroups: [\"\"]\n  resources: [secrets]\n  verbs: [get]\n",
			want: "get secrets: more than the plugin's Events need"},
		{desc: "a token Secret", extra: "kind: Secret\nmetadata: {name: t}\ntype: kubernetes.io/service-account-token\n",
			want: "a token that never expires"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			objs := objects(t, "plugin")
			for i, o := range objs {
				if o.Kind != "DaemonSet" || tc.change == nil {
					continue
				}
				var ds appsv1.DaemonSet
				if err := yaml.UnmarshalStrict(o.Raw, &ds); err != nil {
					t.Fatal(err)
				}
				tc.change(&ds, &ds.Spec.Template.Spec.Containers[0])
				b, err := yaml.Marshal(ds)
				if err != nil {
					t.Fatal(err)
				}
				objs[i].Raw = b
			}
			if tc.extra != "" {
				extra, err := deploy.Split("extra.yaml", []byte(tc.extra))
				if err != nil {
					t.Fatal(err)
				}
				objs = append(objs, extra...)
			}
			errs := deploy.PluginLeastPrivilege(objs)
			if !slices.ContainsFunc(errs, func(err error) bool { return strings.Contains(err.Error(), tc.want) }) {
				t.Errorf("PluginLeastPrivilege = %v, want an error saying %q", errs, tc.want)
			}
		})
	}
}
