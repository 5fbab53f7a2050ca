package critest

import (
	"fmt"
	"os"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// Aliases are the registries critest pulls from; containerd sends
// them to the local registry (hosts.toml, plain HTTP).
// k8s.gcr.io is the old name of registry.k8s.io: critest pulls pause:3.9
// from both and expects the same image.
var Aliases = []string{"registry.k8s.io", "gcr.io", "k8s.gcr.io"}

// /etc/passwd and /etc/group of the busybox images critest's images are
// built FROM (busybox:1.37.0).
const (
	busyboxPasswd = `root:x:0:0:root:/root:/bin/sh
daemon:x:1:1:daemon:/usr/sbin:/bin/false
bin:x:2:2:bin:/bin:/bin/false
sys:x:3:3:sys:/dev:/bin/false
sync:x:4:100:sync:/bin:/bin/sync
mail:x:8:8:mail:/var/spool/mail:/bin/false
www-data:x:33:33:www-data:/var/www:/bin/false
operator:x:37:37:Operator:/var:/bin/false
nobody:x:65534:65534:nobody:/home:/bin/false
`
	busyboxGroup = `root:x:0:
daemon:x:1:
bin:x:2:
sys:x:3:
adm:x:4:
tty:x:5:
disk:x:6:
lp:x:7:
mail:x:8:
kmem:x:9:
wheel:x:10:root
cdrom:x:11:
dialout:x:18:
floppy:x:19:
video:x:28:
audio:x:29:
tape:x:32:
www-data:x:33:
operator:x:37:
utmp:x:43:
plugdev:x:46:
staff:x:50:
lock:x:54:
netdev:x:82:
users:x:100:
nogroup:x:65534:
`
)

// Images builds stand-ins for the images critest pulls
// (pkg/validate/consts.go, pkg/framework/util.go, images/ in cri-tools),
// keyed "repository:tag" as the local registry serves them. Each is the
// given static busybox plus what the original's Dockerfile adds. The image
// pinned by digest (test-image-digest@sha256:9700f9a2...) cannot be rebuilt
// and is left out; its spec is in the skip list.
//
// The parts busybox cannot play (the pause process, nginx, httpd, a setuid
// program) are the stand-in binary (hack/critest/standin) installed under
// the names critest looks for.
func Images(busybox, standin string) (map[string]*harness.Image, error) {
	bin, err := os.ReadFile(standin)
	if err != nil {
		return nil, fmt.Errorf("read critest stand-in binary (make conformance-tools builds it): %w", err)
	}
	as := func(path string, mode int64) harness.File { return harness.File{Name: path, Mode: mode, Data: bin} }
	etc := []harness.File{
		{Name: "etc/passwd", Mode: 0o644, Data: []byte(busyboxPasswd)},
		{Name: "etc/group", Mode: 0o644, Data: []byte(busyboxGroup)},
	}
	page := harness.File{Name: "www/index.html", Mode: 0o644, Data: []byte("<html><body>cri-nstarget critest stand-in</body></html>\n")}
	with := func(extra ...harness.File) []harness.File {
		return append(append([]harness.File(nil), etc...), extra...)
	}
	marker := func(name string) harness.File { return harness.File{Name: name, Mode: 0o644} }
	const k8s, cri = "e2e-test-images/", "k8s-staging-cri-tools/"
	type spec struct {
		keys []string
		opts harness.ImageOptions
	}
	specs := []spec{
		{[]string{k8s + "busybox:1.29-2"}, harness.ImageOptions{Cmd: []string{"sh"}, Files: with()}},
		// The sandbox image: a pause process that is not named "sleep"
		// (critest pgreps for sleep in pods that share the PID namespace).
		{[]string{harness.PauseName}, harness.ImageOptions{Cmd: []string{"/pause"}, Files: with(as("pause", 0o755))}},
		// pause:3.9, which critest pulls from two registries
		// (registry.k8s.io, k8s.gcr.io) for one image id and expects to
		// carry exactly those two tags: an image of its own, not the
		// sandbox image, which has a tag of its own.
		{[]string{"pause:3.9"}, harness.ImageOptions{Cmd: []string{"/pause"}, Files: with(as("pause", 0o755), marker("pause-3.9"))}},
		{[]string{k8s + "nginx:1.14-2"}, harness.ImageOptions{Cmd: []string{"/usr/sbin/nginx", "-g", "daemon off;"}, Files: with(as("usr/sbin/nginx", 0o755))}},
		{[]string{k8s + "httpd:2.4.39-4"}, harness.ImageOptions{Cmd: []string{"/usr/sbin/httpd"}, Files: with(as("usr/sbin/httpd", 0o755))}},
		{[]string{k8s + "nonewprivs:1.3"}, harness.ImageOptions{Cmd: []string{"/usr/bin/nnp"}, Files: with(as("usr/bin/nnp", 0o4755))}},
		// hostnet-nginx serves on 12003 in the host's network: busybox httpd.
		{[]string{cri + "hostnet-nginx-amd64:latest"}, harness.ImageOptions{Cmd: []string{"httpd", "-f", "-p", "12003", "-h", "/www"}, Files: with(page)}},
		{[]string{cri + "test-image-user-uid:latest"}, harness.ImageOptions{Cmd: []string{"sh"}, User: "1002", Files: with()}},
		{[]string{cri + "test-image-user-username:latest"}, harness.ImageOptions{Cmd: []string{"sh"}, User: "www-data", Files: with()}},
		{[]string{cri + "test-image-user-uid-group:latest"}, harness.ImageOptions{Cmd: []string{"sh"}, User: "1003:1004", Files: with()}},
		{[]string{cri + "test-image-user-username-group:latest"}, harness.ImageOptions{Cmd: []string{"sh"}, User: "www-data:1004", Files: with()}},
		{[]string{cri + "test-image-predefined-group:latest"}, harness.ImageOptions{Cmd: []string{"sh"}, User: "1000", Files: []harness.File{
			{Name: "etc/passwd", Mode: 0o644, Data: []byte(busyboxPasswd + "default-user:x:1000:1000:Linux User,,,:/home/default-user:/bin/sh\n")},
			{Name: "etc/group", Mode: 0o644, Data: []byte(busyboxGroup + "default-user:x:1000:\ngroup-defined-in-image:x:50000:default-user\n")},
		}}},
		{[]string{cri + "test-image-latest:latest"}, harness.ImageOptions{Cmd: []string{"sh"}, Files: with(marker("test-image-latest"))}},
		{[]string{cri + "test-image-tag:test", cri + "test-image-tag:all"}, harness.ImageOptions{Cmd: []string{"sh"}, Files: with(marker("test-image-tag"))}},
		{[]string{cri + "test-image-1:latest"}, harness.ImageOptions{Cmd: []string{"sh"}, Files: with(marker("test-image-1"))}},
		{[]string{cri + "test-image-2:latest"}, harness.ImageOptions{Cmd: []string{"sh"}, Files: with(marker("test-image-2"))}},
		{[]string{cri + "test-image-3:latest"}, harness.ImageOptions{Cmd: []string{"sh"}, Files: with(marker("test-image-3"))}},
		{[]string{cri + "test-image-tags:1", cri + "test-image-tags:2", cri + "test-image-tags:3"}, harness.ImageOptions{Cmd: []string{"sh"}, Files: with(marker("same-image"))}},
	}
	images := map[string]*harness.Image{}
	for _, s := range specs {
		s.opts.Busybox = busybox
		img, err := harness.BuildImage(s.opts)
		if err != nil {
			return nil, fmt.Errorf("build critest image %s: %w", s.keys[0], err)
		}
		for _, k := range s.keys {
			images[k] = img
		}
	}
	return images, nil
}

// BenchAliases are the registries critest -benchmark pulls from besides
// Aliases: its image benchmarks use public.ecr.aws/docker/library/busybox.
var BenchAliases = []string{"public.ecr.aws"}

// BenchImageTags are the busybox tags critest's image benchmarks name
// (pkg/benchmark/image.go, the amd64 list): the first is pulled and removed,
// all of them are removed after each image spec.
var BenchImageTags = []string{"1.35.0-glibc", "1-uclibc", "1", "1-glibc", "1-musl"}

// BenchImages is Images plus the busybox stand-ins critest -benchmark pulls
// (BenchImageTags, under BenchAliases' docker/library/busybox).
func BenchImages(busybox, standin string) (map[string]*harness.Image, error) {
	images, err := Images(busybox, standin)
	if err != nil {
		return nil, err
	}
	for _, tag := range BenchImageTags {
		img, err := harness.BuildImage(harness.ImageOptions{Busybox: busybox, Cmd: []string{"sh"},
			Files: []harness.File{{Name: "benchmark-image-" + tag, Mode: 0o644}}})
		if err != nil {
			return nil, fmt.Errorf("build benchmark image busybox:%s: %w", tag, err)
		}
		images["docker/library/busybox:"+tag] = img
	}
	return images, nil
}
