// Command nstarget-chart makes a release's copies of the cluster install,
// deploy/ and the Helm chart charts/cri-nstarget, with the image's version
// and digest written in (make release; hack/release.sh), with Helm's and
// kustomize's own libraries:
//
//	nstarget-chart --version vX.Y.Z --digest sha256:... --epoch SOURCE_DATE_EPOCH --out DIR \
//	    [--chart charts/cri-nstarget] [--deploy deploy]
//
// DIR gets deploy/ (its manifests, no Go file; install/kustomization.yaml
// and plugin/kustomization.yaml with the image's tag and digest and the
// version label set) and
// cri-nstarget-X.Y.Z.tgz (`helm package` of the chart, version X.Y.Z,
// appVersion vX.Y.Z, the digest in values.yaml; every date --epoch). Both
// are checked first as chart_test.go checks the tree's: the chart lints,
// renders the same objects as kustomize builds of the copy (install,
// cleanup and plugin), the image is REPOSITORY:vX.Y.Z@DIGEST in both, every object is
// labelled with the version, and deploy.LeastPrivilege finds nothing.
//
// It is its own module (go.mod here): Helm's and kustomize's dependencies
// stay out of the project's go.mod.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/cri-nstarget/cri-nstarget/deploy"
)

// The image deploy/ and the chart name until an operator names theirs.
const repository = "registry.example.com/cri-nstarget"

var (
	versionRE = regexp.MustCompile(`^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$`)
	digestRE  = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)
)

type options struct {
	chart, deploy, out, version, digest string
	epoch                               int64
}

func main() {
	var o options
	flag.StringVar(&o.chart, "chart", "charts/cri-nstarget", "the chart")
	flag.StringVar(&o.deploy, "deploy", "deploy", "deploy/")
	flag.StringVar(&o.out, "out", "", "where the copies go")
	flag.StringVar(&o.version, "version", "", "the release's version, vX.Y.Z (the image's tag)")
	flag.StringVar(&o.digest, "digest", "", "the image's digest, sha256:... (its index's, make image's IMAGE_OUT/digest)")
	flag.Int64Var(&o.epoch, "epoch", -1, "the chart archive's dates, in seconds since 1970 (SOURCE_DATE_EPOCH)")
	flag.Parse()
	if err := release(o); err != nil {
		fmt.Fprintln(os.Stderr, "nstarget-chart:", err)
		os.Exit(1)
	}
}

// release writes the copies into o.out and checks them.
func release(o options) error {
	switch {
	case o.out == "" || o.epoch < 0:
		return errors.New("--out and --epoch are required")
	case !versionRE.MatchString(o.version):
		return fmt.Errorf("--version %q: want vX.Y.Z or vX.Y.Z-PRERELEASE", o.version)
	case !digestRE.MatchString(o.digest):
		return fmt.Errorf("--digest %q: want sha256: and 64 hex digits", o.digest)
	}
	deployDir := filepath.Join(o.out, "deploy")
	if err := copyTree(deployDir, o.deploy); err != nil {
		return err
	}
	if err := stampDeploy(deployDir, o.version, o.digest); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "nstarget-chart-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	chartDir := filepath.Join(tmp, filepath.Base(o.chart))
	if err := copyTree(chartDir, o.chart); err != nil {
		return err
	}
	if err := stampChart(chartDir, o.version, o.digest); err != nil {
		return err
	}
	if err := verify(chartDir, deployDir, o.version, repository+":"+o.version+"@"+o.digest); err != nil {
		return err
	}
	_, err = packageChart(chartDir, o.out, time.Unix(o.epoch, 0))
	return err
}

// verify checks the chart directory against deploy/: it lints; with its
// default values, in cleanup mode and in plugin mode, it renders what
// kustomize builds of deploy/, deploy/cleanup/ and deploy/plugin/; each
// DaemonSet's image is image; every object carries the version label; and
// deploy.LeastPrivilege (deploy.PluginLeastPrivilege for the plugin's)
// finds nothing in either.
func verify(chartPath, deployDir, version, image string) error {
	if errs := lint(chartPath, nil); len(errs) > 0 {
		return fmt.Errorf("helm lint %s: %w", chartPath, errors.Join(errs...))
	}
	for _, f := range flavours {
		if err := verifyMode(chartPath, filepath.Join(deployDir, f.dir), f, version, image); err != nil {
			return err
		}
	}
	return nil
}

// flavour is one way the chart renders deploy/: with vals, what kustomize
// builds of deploy/dir, its objects labelled app, its DaemonSet (key)
// checked by leastPrivilege.
type flavour struct {
	dir            string
	vals           map[string]any
	app            string
	daemonSet      string
	leastPrivilege func([]deploy.Object) []error
}

var flavours = []flavour{
	{dir: "", app: "cri-nstarget-install", daemonSet: installDaemonSet, leastPrivilege: deploy.LeastPrivilege},
	{dir: "cleanup", vals: map[string]any{"mode": "cleanup"}, app: "cri-nstarget-install", daemonSet: installDaemonSet, leastPrivilege: deploy.LeastPrivilege},
	{dir: "plugin", vals: map[string]any{"mode": "plugin"}, app: "cri-nstarget-plugin", daemonSet: pluginDaemonSet, leastPrivilege: deploy.PluginLeastPrivilege},
}

func verifyMode(chartPath, kustomization string, f flavour, version, image string) error {
	rendered, err := render(chartPath, f.vals)
	if err != nil {
		return err
	}
	built, err := build(kustomization)
	if err != nil {
		return err
	}
	return errors.Join(
		checkObjects(chartPath, rendered, f, version, image),
		checkObjects(kustomization, built, f, version, image),
		same(rendered, built))
}

// checkObjects checks one render: its DaemonSet's image, the version
// labels, and the flavour's least privilege.
func checkObjects(what string, objs []deploy.Object, f flavour, version, image string) error {
	m, err := objectMaps(objs)
	if err != nil {
		return err
	}
	got, _, err := container(m, f.daemonSet)
	if err == nil && got != image {
		err = fmt.Errorf("the image of %s is %s, want %s", f.daemonSet, got, image)
	}
	errs := append([]error{err, versionLabels(m, f.app, version)}, f.leastPrivilege(objs)...)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	return nil
}
