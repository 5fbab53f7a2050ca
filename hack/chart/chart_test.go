package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/cri-nstarget/cri-nstarget/deploy"
)

// The tree's chart and deploy/, and what they name until a release.
const (
	chartDir  = "../../charts/cri-nstarget"
	deployDir = "../../deploy"
	version   = "v0.0.0"
	digest    = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

// TestChart: the chart lints (helm lint --strict), and renders with its
// default values what kustomize builds of deploy/ (in cleanup mode, of
// deploy/cleanup/; in plugin mode, of deploy/plugin/): the same objects,
// fields and labels, but for Helm's own labels, which the chart adds to
// each; every object labelled with the version; deploy.LeastPrivilege
// (deploy.PluginLeastPrivilege in plugin mode) finds nothing in either.
func TestChart(t *testing.T) {
	if err := verify(chartDir, deployDir, version, repository+":"+version); err != nil {
		t.Fatal(err)
	}
}

// TestPlugin: what kustomize builds of deploy/plugin (the plugin mode's
// pod; the chart's mode: plugin, TestChart) asks for no more than
// deploy.PluginLeastPrivilege allows, as deploy's own test finds of its
// files as written.
func TestPlugin(t *testing.T) {
	objs, err := build(filepath.Join(deployDir, "plugin"))
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) < 6 {
		t.Fatalf("%d objects built of deploy/plugin", len(objs))
	}
	for _, err := range deploy.PluginLeastPrivilege(objs) {
		t.Error(err)
	}
}

// TestValues: each value reaches the installer's container, the digest
// winning over the tag, and the schema refuses what the installer would.
func TestValues(t *testing.T) {
	for _, tc := range []struct {
		name     string
		vals     string
		image    string
		args     []string
		selector map[string]any
		refused  string // in the error, when the values are refused
	}{
		{name: "defaults", image: repository + ":v0.0.0",
			args: []string{"install", "--max-concurrent-restarts=1"}},
		{name: "tag", vals: "image: {tag: v1.2.3}", image: repository + ":v1.2.3"},
		{name: "digest", vals: "image: {digest: " + digest + "}", image: repository + ":v0.0.0@" + digest},
		{name: "repository, tag and digest", vals: "image: {repository: r.example/x/cri-nstarget, tag: v1.2.3, digest: " + digest + "}",
			image: "r.example/x/cri-nstarget:v1.2.3@" + digest},
		{name: "restarts and timeouts", vals: "maxConcurrentRestarts: 3\ntimeouts: {health: 3m, ready: 1m30s, notReadyGrace: 15s, guardAfter: 150s}",
			args: []string{"install", "--max-concurrent-restarts=3", "--guard-after=150s", "--health-timeout=3m",
				"--not-ready-grace=15s", "--ready-timeout=1m30s"}},
		{name: "node selector", vals: "nodeSelector: {pool: edge, kubernetes.io/os: windows}",
			selector: map[string]any{"kubernetes.io/os": "linux", "cri-nstarget.io/install": "true", "pool": "edge"}},
		{name: "cleanup", vals: "mode: cleanup", args: []string{"cleanup", "--max-concurrent-restarts=1"}},
		{name: "no restart", vals: "maxConcurrentRestarts: 0", refused: "maxConcurrentRestarts"},
		{name: "a digest that is not", vals: "image: {digest: latest}", refused: "digest"},
		{name: "a duration that is not", vals: "timeouts: {ready: 2 minutes}", refused: "ready"},
		{name: "a mode that is not", vals: "mode: proxy", refused: "mode"},
		{name: "a value that is not", vals: "maxConcurentRestarts: 2", refused: "maxConcurentRestarts"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.vals), &vals); err != nil {
				t.Fatal(err)
			}
			objs, err := render(chartDir, vals)
			if tc.refused != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("rendered with %q (error %v), want it refused for %s", tc.vals, err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			checkInstaller(t, objs, tc.image, tc.args, tc.selector)
			for _, err := range deploy.LeastPrivilege(objs) {
				t.Error(err)
			}
		})
	}
}

// TestPluginValues: in plugin mode the chart renders the plugin's objects
// alone (none of the installer's), its image and node selector from the
// values, and deploy.PluginLeastPrivilege finds nothing in them.
func TestPluginValues(t *testing.T) {
	for _, tc := range []struct {
		name     string
		vals     string
		image    string
		selector map[string]any
	}{
		{name: "defaults", vals: "mode: plugin", image: repository + ":v0.0.0",
			selector: map[string]any{"kubernetes.io/os": "linux", "cri-nstarget.io/plugin": "true"}},
		{name: "image", vals: "mode: plugin\nimage: {repository: r.example/x/cri-nstarget, tag: v1.2.3, digest: " + digest + "}",
			image: "r.example/x/cri-nstarget:v1.2.3@" + digest},
		{name: "node selector", vals: "mode: plugin\nplugin: {nodeSelector: {pool: edge, kubernetes.io/os: windows}}",
			selector: map[string]any{"kubernetes.io/os": "linux", "cri-nstarget.io/plugin": "true", "pool": "edge"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals := map[string]any{}
			if err := yaml.Unmarshal([]byte(tc.vals), &vals); err != nil {
				t.Fatal(err)
			}
			objs, err := render(chartDir, vals)
			if err != nil {
				t.Fatal(err)
			}
			m, err := objectMaps(objs)
			if err != nil {
				t.Fatal(err)
			}
			for k := range m {
				if !strings.Contains(k, "cri-nstarget-plugin") {
					t.Errorf("%s rendered in plugin mode, where only the plugin's objects are", k)
				}
			}
			image, _, err := container(m, pluginDaemonSet)
			if err != nil {
				t.Fatal(err)
			}
			if tc.image != "" && image != tc.image {
				t.Errorf("image %s, want %s", image, tc.image)
			}
			if got := dig(m[pluginDaemonSet], "spec", "template", "spec", "nodeSelector"); tc.selector != nil && !reflect.DeepEqual(got, tc.selector) {
				t.Errorf("nodeSelector %v, want %v", got, tc.selector)
			}
			for _, err := range deploy.PluginLeastPrivilege(objs) {
				t.Error(err)
			}
		})
	}
}

func checkInstaller(t *testing.T, objs []deploy.Object, image string, args []string, selector map[string]any) {
	t.Helper()
	m, err := objectMaps(objs)
	if err != nil {
		t.Fatal(err)
	}
	gotImage, gotArgs, err := installer(m)
	if err != nil {
		t.Fatal(err)
	}
	if image != "" && gotImage != image {
		t.Errorf("image %s, want %s", gotImage, image)
	}
	if args != nil && !slices.Equal(gotArgs, args) {
		t.Errorf("args %q, want %q", gotArgs, args)
	}
	if got := dig(m["DaemonSet cri-nstarget/cri-nstarget-install"], "spec", "template", "spec", "nodeSelector"); selector != nil && !reflect.DeepEqual(got, selector) {
		t.Errorf("nodeSelector %v, want %v", got, selector)
	}
}

// TestRelease: make release's copies (nstarget-chart) name the release's
// version and the image's digest, in deploy/ and in the chart's archive,
// and pass verify's checks; the archive is the same bytes twice.
func TestRelease(t *testing.T) {
	const v = "v1.2.3"
	var archives [][]byte
	for i := range 2 {
		out := t.TempDir()
		o := options{chart: chartDir, deploy: deployDir, out: out, version: v, digest: digest, epoch: 1700000000}
		if err := release(o); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join(out, "cri-nstarget-1.2.3.tgz"))
		if err != nil {
			t.Fatal(err)
		}
		archives = append(archives, b)
		if i > 0 {
			continue
		}
		ch, err := loadChart(filepath.Join(out, "cri-nstarget-1.2.3.tgz"))
		if err != nil {
			t.Fatal(err)
		}
		if ch.Metadata.Version != "1.2.3" || ch.Metadata.AppVersion != v {
			t.Errorf("the archive's chart: version %s, appVersion %s; want 1.2.3, %s", ch.Metadata.Version, ch.Metadata.AppVersion, v)
		}
		objs, err := render(filepath.Join(out, "cri-nstarget-1.2.3.tgz"), nil)
		if err != nil {
			t.Fatal(err)
		}
		checkInstaller(t, objs, repository+":"+v+"@"+digest, nil, nil)
		checkDates(t, filepath.Join(out, "cri-nstarget-1.2.3.tgz"), time.Unix(o.epoch, 0))
		if _, err := os.Stat(filepath.Join(out, "deploy", "deploy_test.go")); err == nil {
			t.Error("the release's deploy/ has the tests' Go files")
		}
	}
	if !bytes.Equal(archives[0], archives[1]) {
		t.Error("two archives of the same chart and epoch differ")
	}
}

// checkDates: every entry of the archive is dated when.
func checkDates(t *testing.T, archive string, when time.Time) {
	t.Helper()
	f, err := os.Open(archive)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(when) {
			t.Errorf("%s: %s dated %s, want %s (the epoch)", archive, h.Name, h.ModTime.UTC(), when.UTC())
		}
	}
}

// TestReleaseRefuses: no copy without a version and a digest of the form
// make release gives, and the error says which.
func TestReleaseRefuses(t *testing.T) {
	for _, tc := range []struct {
		version, digest, want string
	}{
		{"1.2.3", digest, "--version"},
		{"v1.2.3", "sha256:abc", "--digest"},
		{"v1.2.3", "", "--digest"},
	} {
		o := options{chart: chartDir, deploy: deployDir, out: t.TempDir(), version: tc.version, digest: tc.digest}
		if err := release(o); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("release with version %q, digest %q: error %v, want one about %s", tc.version, tc.digest, err, tc.want)
		}
	}
}
