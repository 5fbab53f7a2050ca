package upstream

import (
	"fmt"
	"os"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// Registry is where the images of Kubernetes' e2e specs come from
// (k8s.io/kubernetes/test/utils/image); containerd sends its pulls to the
// harness's registry (hosts.toml, plain HTTP).
const Registry = "registry.k8s.io"

// Aliases are the registries the specs pull from.
var Aliases = []string{Registry}

// The images the chosen specs use, as test/utils/image/manifest.go names
// them at v1.37.2, keyed "repository:tag" below Registry.
const (
	BusyboxName = "e2e-test-images/busybox:1.37.0-2"
	NginxName   = "e2e-test-images/nginx:1.27.0-2"
	AgnhostName = "e2e-test-images/agnhost:2.66.1"
	// PauseName is served as the cluster's sandbox image itself (see
	// harness.BuildPause): the one containerd runs for every pod.
	PauseName = "pause:3.10.2"
)

// Ref is name (one of the above) under Registry, as the specs pull it.
func Ref(name string) string { return Registry + "/" + name }

// Images builds the stand-ins, each on the static busybox at busybox:
// busybox; nginx, whose image has a shell too (kubectl debug runs sh in it),
// with busybox's httpd on port 80 in place of nginx; agnhost, the agnhost
// binary at agnhostBin (hack/kubernetes.sh --upstream-e2e builds it) with the
// upstream image's entrypoint /agnhost and command pause; and pause.
func Images(busybox, agnhostBin string) (map[string]*harness.Image, error) {
	agnhost, err := os.ReadFile(agnhostBin)
	if err != nil {
		return nil, fmt.Errorf("read agnhost (hack/kubernetes.sh --upstream-e2e builds it): %w", err)
	}
	page := harness.File{Name: "usr/share/nginx/html/index.html", Mode: 0o644, Data: []byte("<html><body>cri-nstarget nginx stand-in</body></html>\n")}
	specs := map[string]harness.ImageOptions{
		BusyboxName: {Cmd: []string{"sh"}},
		NginxName:   {Cmd: []string{"httpd", "-f", "-p", "80", "-h", "/usr/share/nginx/html"}, Files: []harness.File{page}},
		AgnhostName: {Entrypoint: []string{"/agnhost"}, Cmd: []string{"pause"}, Files: []harness.File{{Name: "agnhost", Mode: 0o755, Data: agnhost}}},
	}
	images := map[string]*harness.Image{}
	for name, opts := range specs {
		opts.Busybox = busybox
		if images[name], err = harness.BuildImage(opts); err != nil {
			return nil, fmt.Errorf("build %s: %w", name, err)
		}
	}
	if images[PauseName], err = harness.BuildPause(); err != nil {
		return nil, fmt.Errorf("build %s: %w", PauseName, err)
	}
	return images, nil
}
