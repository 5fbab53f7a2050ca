package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// versionLabel is the label of every object that names the version.
const versionLabel = "app.kubernetes.io/version"

// copyTree copies the regular files of src under dst, but for Go's (deploy/
// holds its tests beside the manifests).
func copyTree(dst, src string) error {
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		switch {
		case d.IsDir():
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		case !d.Type().IsRegular() || strings.HasSuffix(p, ".go"):
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
}

// editYAML applies edit to the YAML file p, keeping its comments.
func editYAML(p string, edit func(*kyaml.RNode) error) error {
	n, err := kyaml.ReadFile(p)
	if err != nil {
		return err
	}
	if err := edit(n); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return kyaml.WriteFile(n, p)
}

// stampDeploy sets, in a copy of deploy/ at dir, the image's tag (version)
// and digest and the version label (install/kustomization.yaml, and the
// plugin mode's plugin/kustomization.yaml).
func stampDeploy(dir, version, digest string) error {
	for _, k := range []string{"install", "plugin"} {
		if err := stampKustomization(filepath.Join(dir, k, "kustomization.yaml"), version, digest); err != nil {
			return err
		}
	}
	return nil
}

// stampKustomization is stampDeploy's edit of one kustomization.yaml.
func stampKustomization(p, version, digest string) error {
	return editYAML(p, func(n *kyaml.RNode) error {
		img, err := n.Pipe(kyaml.Lookup("images"), kyaml.MatchElement("name", "cri-nstarget"))
		if err != nil {
			return err
		}
		if img == nil {
			return errors.New("no image cri-nstarget under images")
		}
		if err := img.PipeE(kyaml.SetField("newTag", kyaml.NewStringRNode(version))); err != nil {
			return err
		}
		if err := img.PipeE(kyaml.SetField("digest", kyaml.NewStringRNode(digest))); err != nil {
			return err
		}
		return setVersionLabel(n, version)
	})
}

// setVersionLabel sets versionLabel in each of a kustomization's labels
// that has it: one at least.
func setVersionLabel(n *kyaml.RNode, version string) error {
	labels, err := n.Pipe(kyaml.Lookup("labels"))
	if err != nil || labels == nil {
		return fmt.Errorf("no labels: %v", err)
	}
	els, err := labels.Elements()
	if err != nil {
		return err
	}
	set := 0
	for _, el := range els {
		f, err := el.Pipe(kyaml.Lookup("pairs", versionLabel))
		if err != nil {
			return err
		}
		if f != nil {
			if err := el.PipeE(kyaml.Lookup("pairs"), kyaml.SetField(versionLabel, kyaml.NewStringRNode(version))); err != nil {
				return err
			}
			set++
		}
	}
	if set == 0 {
		return fmt.Errorf("no %s under labels", versionLabel)
	}
	return nil
}

// digestLine is the chart's image digest in values.yaml, empty in the
// tree.
var digestLine = regexp.MustCompile(`(?m)^  digest: ""$`)

// stampChart sets, in a copy of the chart at dir, its version (vX.Y.Z:
// the chart's X.Y.Z, its appVersion vX.Y.Z, Chart.yaml) and the image's
// digest (values.yaml). That line is replaced as it is, not through a YAML
// encoder, which would drop the file's blank lines (helm show values
// prints it); verify's render checks the result.
func stampChart(dir, version, digest string) error {
	cf := filepath.Join(dir, chartutil.ChartfileName)
	md, err := chartutil.LoadChartfile(cf)
	if err != nil {
		return err
	}
	md.Version, md.AppVersion = strings.TrimPrefix(version, "v"), version
	if err := chartutil.SaveChartfile(cf, md); err != nil {
		return err
	}
	p := filepath.Join(dir, chartutil.ValuesfileName)
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if n := len(digestLine.FindAll(b, -1)); n != 1 {
		return fmt.Errorf("%s: %d lines %q, want 1", p, n, digestLine)
	}
	return os.WriteFile(p, digestLine.ReplaceAll(b, []byte(`  digest: "`+digest+`"`)), 0o644)
}

// packageChart is `helm package` of the chart at dir into out, every date
// epoch (as `helm package` does under SOURCE_DATE_EPOCH): out/NAME-VERSION.tgz,
// the same bytes for the same inputs.
func packageChart(dir, out string, epoch time.Time) (string, error) {
	ch, err := loadChart(dir)
	if err != nil {
		return "", err
	}
	ch.StampModTimes(epoch)
	return chartutil.Save(ch, out)
}
