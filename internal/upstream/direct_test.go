package upstream

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// TestDirectKeyChangesWithEachInput: the direct run's key is the same for
// the same inputs and changes with any one of them: a binary, the images,
// the run's settings, the versions, the kernel, and the configuration the
// rig gives containerd and the cluster (not the rig's own code, which is
// not an input: a change to it that leaves that configuration alone keeps
// the key).
func TestDirectKeyChangesWithEachInput(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	roles := []string{"e2e.test", "nstarget-e2e.test", "kubelet", "kube-apiserver", "etcd", "containerd", "runc", "cni bridge"}
	base := func() DirectInputs {
		in := DirectInputs{
			Binaries: map[string]string{},
			Images:   map[string]*harness.Image{"busybox:1.36.1-1": {ManifestDigest: digest.FromString("busybox")}},
			Focus:    "Ephemeral Containers", Procs: 1, Timeout: 20 * time.Minute,
			Versions: "e2e.test v1.37.2, kubelet v1.37.2", Kernel: "6.12.0",
			NodeConfig: "version = 4\nkubelet --config /run/nstarget-key/k/kubelet.yaml",
			Args:       "e2e.test --provider=skeleton --num-nodes=1",
		}
		for _, r := range roles {
			in.Binaries[r] = write(r, "build of "+r)
		}
		return in
	}
	sum := func(in DirectInputs) string {
		t.Helper()
		s, err := DirectKey(in).Sum()
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	want := sum(base())
	if got := sum(base()); got != want {
		t.Fatalf("the same inputs: %s, then %s", want, got)
	}
	changes := map[string]func(*DirectInputs){
		"image": func(in *DirectInputs) {
			in.Images["busybox:1.36.1-1"] = &harness.Image{ManifestDigest: digest.FromString("other")}
		},
		"focus":    func(in *DirectInputs) { in.Focus = "kubectl debug" },
		"skip":     func(in *DirectInputs) { in.Skip = "Serial" },
		"procs":    func(in *DirectInputs) { in.Procs = 4 },
		"timeout":  func(in *DirectInputs) { in.Timeout = time.Hour },
		"versions": func(in *DirectInputs) { in.Versions = "e2e.test v1.37.2, kubelet v1.36.3" },
		"kernel":   func(in *DirectInputs) { in.Kernel = "6.13.0" },
		"args":     func(in *DirectInputs) { in.Args = "e2e.test --provider=skeleton --num-nodes=2" },
		"node config": func(in *DirectInputs) {
			in.NodeConfig = "version = 4\nkubelet --config /run/nstarget-key/k/kubelet.yaml --v 4"
		},
	}
	for _, r := range roles {
		changes["binary "+r] = func(*DirectInputs) { write(r, "another build of "+r) }
	}
	for name, change := range changes {
		in := base()
		change(&in)
		if got := sum(in); got == want {
			t.Errorf("%s changed: the key stayed %s", name, got)
		}
	}
}

func TestClean(t *testing.T) {
	for _, tc := range []struct {
		desc string
		r    []Result
		want bool
	}{
		{"passed and skipped", []Result{{State: "passed"}, {State: "skipped"}}, true},
		{"one failed", []Result{{State: "passed"}, {State: "failed"}}, false},
		{"timed out", []Result{{State: "passed"}, {State: "timedout"}}, false},
		{"none passed", []Result{{State: "skipped"}}, false},
		{"nothing", nil, false},
	} {
		if got := Clean(tc.r); got != tc.want {
			t.Errorf("%s: Clean %v, want %v", tc.desc, got, tc.want)
		}
	}
}
