package main

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/loader"
	chart "helm.sh/helm/v4/pkg/chart/v2"
	chartlint "helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"helm.sh/helm/v4/pkg/engine"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/cri-nstarget/cri-nstarget/deploy"
)

// helmLabels are the labels the chart adds to deploy/'s: Helm's own, which
// a kustomization has no value for. The others (the app's name and
// version) are on both.
var helmLabels = []string{"app.kubernetes.io/instance", "app.kubernetes.io/managed-by", "helm.sh/chart"}

// releaseName is the name the renders here give the release.
const releaseName = "cri-nstarget"

// kubeVersion is the Kubernetes the renders here take the cluster to be:
// the oldest the chart accepts (its kubeVersion), not Helm's default for a
// render without a cluster (1.20), which it refuses.
var kubeVersion = &common.KubeVersion{Version: "v1.30.0", Major: "1", Minor: "30"}

// lint is `helm lint --strict` of the chart directory dir with vals: each
// warning or error, nil when none.
func lint(dir string, vals map[string]any) []error {
	res := chartlint.RunAll(dir, vals, "default", chartlint.WithKubeVersion(kubeVersion))
	var errs []error
	for _, m := range res.Messages {
		if m.Severity >= support.WarningSev {
			errs = append(errs, m)
		}
	}
	return errs
}

// render is `helm template` of the chart at path (a directory or a .tgz)
// with vals, as Helm's install does it without a cluster: the values
// checked against the chart's schema, the chart's kubeVersion against
// kubeVersion, every template rendered but NOTES.txt. Its objects.
func render(path string, vals map[string]any) ([]deploy.Object, error) {
	ch, err := loadChart(path)
	if err != nil {
		return nil, err
	}
	caps := common.DefaultCapabilities.Copy()
	caps.KubeVersion = *kubeVersion
	if kv := ch.Metadata.KubeVersion; kv != "" && !chartutil.IsCompatibleRange(kv, caps.KubeVersion.String()) {
		return nil, fmt.Errorf("render %s: it requires Kubernetes %s, not %s", path, kv, caps.KubeVersion.Version)
	}
	opts := common.ReleaseOptions{Name: releaseName, Namespace: "default", Revision: 1, IsInstall: true}
	values, err := util.ToRenderValuesWithSchemaValidation(ch, vals, opts, caps, false)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", path, err)
	}
	files, err := engine.Render(ch, values)
	if err != nil {
		return nil, fmt.Errorf("render %s: %w", path, err)
	}
	var out []deploy.Object
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if strings.HasSuffix(name, "/NOTES.txt") {
			continue
		}
		objs, err := deploy.Split(name, []byte(files[name]))
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// loadChart loads the chart at path, a directory or an archive.
func loadChart(path string) (*chart.Chart, error) {
	c, err := loader.Load(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	ch, ok := c.(*chart.Chart)
	if !ok {
		return nil, fmt.Errorf("load %s: a chart of type %T, want apiVersion v2", path, c)
	}
	return ch, nil
}

// build is `kubectl kustomize dir`: its objects.
func build(dir string) ([]deploy.Object, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	b, err := m.AsYaml()
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	return deploy.Split(dir, b)
}

// key names an object: kind, namespace and name.
func key(o map[string]any) string {
	meta, _ := o["metadata"].(map[string]any)
	return fmt.Sprintf("%v %v/%v", o["kind"], meta["namespace"], meta["name"])
}

// objectMaps decodes each object as JSON would (what the apiserver
// compares), by key; an object twice is an error.
func objectMaps(objs []deploy.Object) (map[string]map[string]any, error) {
	out := map[string]map[string]any{}
	for _, o := range objs {
		m, err := decodeMap(o)
		if err != nil {
			return nil, err
		}
		if _, dup := out[key(m)]; dup {
			return nil, fmt.Errorf("%s: %s twice", o.Source, key(m))
		}
		out[key(m)] = m
	}
	return out, nil
}

func decodeMap(o deploy.Object) (map[string]any, error) {
	var m map[string]any
	if err := yaml.Unmarshal(o.Raw, &m); err != nil {
		return nil, fmt.Errorf("%s (%s): %w", o.Source, o.Kind, err)
	}
	return m, nil
}

// same says how the chart's objects differ from deploy/'s (as kustomize
// builds them): the same objects with the same fields, but for the chart's
// helmLabels, which each of its objects must have.
func same(chartObjs, deployObjs []deploy.Object) error {
	c, err := objectMaps(chartObjs)
	if err != nil {
		return err
	}
	d, err := objectMaps(deployObjs)
	if err != nil {
		return err
	}
	if err := withoutHelmLabels(c); err != nil {
		return err
	}
	if diff := cmp.Diff(d, c); diff != "" {
		return fmt.Errorf("the chart's objects differ from deploy/'s (-deploy +chart):\n%s", diff)
	}
	return nil
}

// labelMaps are the object's labels and, for a workload, its pod
// template's.
func labelMaps(o map[string]any) []map[string]any {
	var out []map[string]any
	for _, meta := range []any{o["metadata"], dig(o, "spec", "template", "metadata")} {
		if m, ok := meta.(map[string]any); ok {
			if l, ok := m["labels"].(map[string]any); ok {
				out = append(out, l)
			}
		}
	}
	return out
}

func dig(o map[string]any, path ...string) any {
	var v any = o
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

// withoutHelmLabels removes helmLabels from the objects (in place), and
// says which object lacked one.
func withoutHelmLabels(objs map[string]map[string]any) error {
	var errs []error
	for k, o := range objs {
		for _, l := range labelMaps(o) {
			for _, h := range helmLabels {
				if _, ok := l[h]; !ok {
					errs = append(errs, fmt.Errorf("%s: no label %s", k, h))
				}
				delete(l, h)
			}
		}
	}
	return errors.Join(errs...)
}

// versionLabels says which objects (or pod templates) lack the labels
// app.kubernetes.io/name=app and app.kubernetes.io/version=version.
func versionLabels(objs map[string]map[string]any, app, version string) error {
	var errs []error
	for k, o := range objs {
		ls := labelMaps(o)
		if len(ls) == 0 {
			errs = append(errs, fmt.Errorf("%s: no labels", k))
		}
		for _, l := range ls {
			if l["app.kubernetes.io/version"] != version || l["app.kubernetes.io/name"] != app {
				errs = append(errs, fmt.Errorf("%s: app.kubernetes.io/name %v, version %v; want %s, %s",
					k, l["app.kubernetes.io/name"], l["app.kubernetes.io/version"], app, version))
			}
		}
	}
	return errors.Join(errs...)
}

// installer is the installer's container: its image and arguments.
func installer(objs map[string]map[string]any) (image string, args []string, err error) {
	return container(objs, installDaemonSet)
}

// The DaemonSets of the cluster install and of the plugin mode, by key.
const (
	installDaemonSet = "DaemonSet cri-nstarget/cri-nstarget-install"
	pluginDaemonSet  = "DaemonSet cri-nstarget-plugin/cri-nstarget-plugin"
)

// container is the one container of DaemonSet ds (its key): its image and
// arguments.
func container(objs map[string]map[string]any, ds string) (image string, args []string, err error) {
	d, ok := objs[ds]
	if !ok {
		return "", nil, errors.New("no " + ds)
	}
	cs, _ := dig(d, "spec", "template", "spec", "containers").([]any)
	if len(cs) != 1 {
		return "", nil, fmt.Errorf("the DaemonSet has %d containers, want 1", len(cs))
	}
	c, _ := cs[0].(map[string]any)
	image, _ = c["image"].(string)
	as, _ := c["args"].([]any)
	for _, a := range as {
		args = append(args, fmt.Sprint(a))
	}
	return image, args, nil
}
