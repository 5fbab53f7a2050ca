package harness

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtime "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// Names of the images the Env serves.
const (
	BusyboxName = "nst/busybox:1"
	PauseName   = "nst/pause:1"
)

// Env is a registry serving the busybox and pause images and a containerd
// that pulls from it.
type Env struct {
	Registry   *Registry
	Containerd *Containerd
	// BusyboxImage (cmd "sh") and PauseImage (cmd "sleep 2147483647", the
	// sandbox image) are full references into Registry.
	BusyboxImage string
	PauseImage   string
}

// Start builds the images, serves them and starts containerd in dir; an
// empty dir means a new TempDir("nst-"). Close, like a failed
// Start, removes dir.
func Start(ctx context.Context, dir string) (*Env, error) {
	return StartWith(ctx, EnvOptions{Dir: dir})
}

// EnvOptions configure StartWith.
type EnvOptions struct {
	// Dir is containerd's directory; empty means a new TempDir("nst-").
	Dir string
	// Binary, ConfigVersion and Runc choose the containerd and its runc (see Options).
	Binary        string
	ConfigVersion int
	Runc          string
	// Images are served besides BusyboxName and PauseName, keyed "name:tag".
	Images map[string]*Image
	// BusyboxFiles are added to the BusyboxName image (e.g. bin/ipcprobe).
	BusyboxFiles []File
	// RegistryAliases and CNIConfList are passed to containerd (see Options).
	RegistryAliases []string
	CNIConfList     string
	NRIValidator    string
	// Runtimes are runtime handlers besides runc (see Options).
	Runtimes []Runtime
}

// StartWith is Start with options.
func StartWith(ctx context.Context, o EnvOptions) (*Env, error) {
	reg, err := startImageRegistry(o.Images, o.BusyboxFiles)
	if err != nil {
		return nil, err
	}
	dir := o.Dir
	if dir == "" {
		if dir, err = TempDir("nst-"); err != nil {
			return nil, errors.Join(fmt.Errorf("create containerd dir: %w", err), reg.Close())
		}
	}
	e := &Env{Registry: reg, BusyboxImage: reg.Ref(BusyboxName), PauseImage: reg.Ref(PauseName)}
	e.Containerd, err = StartContainerd(ctx, o.containerdOptions(dir, reg.Host()))
	if err != nil {
		if o.Dir == "" {
			// made here: gone with the failure (Stop removes it once
			// containerd ran; a failure before that, such as an unusable
			// binary, leaves it), unless something is still mounted in it
			if m, merr := MountsUnder(dir); merr == nil && len(m) == 0 {
				os.RemoveAll(dir)
			}
		}
		return nil, errors.Join(err, reg.Close())
	}
	return e, nil
}

// containerdOptions are StartContainerd's options for o, in dir, with the
// images served at registryHost.
func (o EnvOptions) containerdOptions(dir, registryHost string) Options {
	return Options{
		Dir: dir, RegistryHost: registryHost, SandboxImage: registryHost + "/" + PauseName,
		Binary: o.Binary, ConfigVersion: o.ConfigVersion, Runc: o.Runc, RegistryAliases: o.RegistryAliases, CNIConfList: o.CNIConfList,
		NRIValidator: o.NRIValidator, Runtimes: o.Runtimes,
	}
}

// The run's own names in NodeConfig: its directory and the registry's
// address.
const (
	nodeConfigDir      = "/run/nstarget-key/c"
	nodeConfigRegistry = "127.0.0.1:1"
)

// NodeConfig is what StartWith writes for containerd with o: each file's
// path and content (the config, the CNI conflist, each hosts.toml), with
// the run's own names (its directory, the registry's address) fixed, so
// that two runs configured alike give the same text. A key of a run the
// harness configures (upstream.DirectKey) holds this rather than the
// harness's code: a change to the harness that leaves containerd's
// configuration alone keeps the key.
func NodeConfig(o EnvOptions) (string, error) {
	opts, err := resolveOptions(o.containerdOptions(nodeConfigDir, nodeConfigRegistry))
	if err != nil {
		return "", err
	}
	files := configFiles(opts)
	var b strings.Builder
	for _, p := range slices.Sorted(maps.Keys(files)) {
		fmt.Fprintf(&b, "== %s\n%s\n", p, files[p])
	}
	return b.String(), nil
}

// startImageRegistry builds the busybox (with files) and pause images and
// serves them with extra.
func startImageRegistry(extra map[string]*Image, files []File) (*Registry, error) {
	busybox, err := BuildImage(ImageOptions{Cmd: []string{"sh"}, Files: files})
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", BusyboxName, err)
	}
	pause, err := BuildPause()
	if err != nil {
		return nil, fmt.Errorf("build %s: %w", PauseName, err)
	}
	images := map[string]*Image{BusyboxName: busybox, PauseName: pause}
	for k, img := range extra {
		images[k] = img
	}
	return StartRegistry(images)
}

// BuildPause builds the sandbox image the Env serves as PauseName (busybox
// running "sleep 2147483647"). Builds are reproducible: an image built with
// it is the sandbox image, whatever name it is served under.
func BuildPause() (*Image, error) {
	return BuildBusybox([]string{"sleep", "2147483647"})
}

// Close stops containerd (see Containerd.Stop) and the registry.
func (e *Env) Close() error {
	return errors.Join(e.Containerd.Stop(), e.Registry.Close())
}

// PullImages pulls the busybox and pause images through the CRI image
// service at endpoint (containerd's, or a proxy in front of it).
func (e *Env) PullImages(ctx context.Context, endpoint string) error {
	conn, err := Dial(endpoint)
	if err != nil {
		return err
	}
	defer conn.Close()
	images := runtime.NewImageServiceClient(conn)
	for _, ref := range []string{e.BusyboxImage, e.PauseImage} {
		req := &runtime.PullImageRequest{Image: &runtime.ImageSpec{Image: ref}}
		if _, err := images.PullImage(ctx, req); err != nil {
			return fmt.Errorf("pull %s via %s: %w", ref, endpoint, err)
		}
	}
	return nil
}

// Dial returns a gRPC client connection to a "unix://PATH" endpoint; opts
// add to (or override) plain-text transport credentials.
func Dial(endpoint string, opts ...grpc.DialOption) (*grpc.ClientConn, error) {
	opts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)
	conn, err := grpc.NewClient(endpoint, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", endpoint, err)
	}
	return conn, nil
}

// StartForTest starts an Env for t, pulls both images into its containerd
// and closes it in t.Cleanup, logging containerd's log tail if t failed.
// It skips t without root or containerd.
func StartForTest(t *testing.T) *Env {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: running containerd and runc needs root")
	}
	if _, err := exec.LookPath("containerd"); err != nil {
		t.Skipf("skipping: containerd not installed: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e, err := Start(ctx, "")
	if err != nil {
		t.Fatalf("start harness: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("containerd log tail:\n%s", e.Containerd.LogTail())
		}
		if err := e.Close(); err != nil {
			t.Errorf("close harness: %v", err)
		}
	})
	if err := e.PullImages(ctx, e.Containerd.Endpoint()); err != nil {
		t.Fatalf("start harness: %v", err)
	}
	return e
}
