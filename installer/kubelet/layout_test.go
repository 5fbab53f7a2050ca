package kubelet

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const shim = "unix:///run/cri-nstarget/cri.sock"

// readFixture reads testdata/name as the installer reads a host: cmdline
// (one argument a line), unit.json (what systemd says of the unit) and the
// files under root/.
func readFixture(t *testing.T, name string) Node {
	t.Helper()
	dir := filepath.Join("testdata", name)
	b, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		t.Fatal(err)
	}
	argv := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var u Unit
	b, err = os.ReadFile(filepath.Join(dir, "unit.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &u); err != nil {
		t.Fatal(err)
	}
	n, err := Read(filepath.Join(dir, "root"), argv, u)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestFind(t *testing.T) {
	for _, tc := range []struct {
		fixture  string
		endpoint string
		path     string
		kind     Kind
		insert   bool
		// after is the line of the changed file that points at the shim.
		after string
	}{
		{fixture: "kubeadm-flags", endpoint: "unix:///var/run/containerd/containerd.sock", path: "/var/lib/kubelet/kubeadm-flags.env", kind: EnvFile,
			after: `KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=` + shim + ` --pod-infra-container-image=registry.k8s.io/pause:3.10"`},
		{fixture: "kubeadm-config", endpoint: "unix:///var/run/containerd/containerd.sock", path: "/var/lib/kubelet/config.yaml", kind: ConfigFile,
			after: "containerRuntimeEndpoint: " + shim},
		{fixture: "config-default", endpoint: DefaultEndpoint, path: "/var/lib/kubelet/config.yaml", kind: ConfigFile, insert: true,
			after: "containerRuntimeEndpoint: " + shim},
		{fixture: "default-kubelet", endpoint: "unix:///run/k3s/containerd/containerd.sock", path: "/etc/default/kubelet", kind: EnvFile,
			after: "KUBELET_EXTRA_ARGS=--container-runtime-endpoint " + shim + " --v=2"},
		{fixture: "dropin-execstart", endpoint: "unix:///run/containerd/containerd.sock", path: "/etc/systemd/system/kubelet.service.d/20-kubelet.conf", kind: UnitFile,
			after: "    --container_runtime_endpoint=" + shim + ` \`},
		{fixture: "config-dir", endpoint: "unix:///run/containerd/containerd.sock", path: "/etc/kubernetes/kubelet.conf.d/50-runtime.conf", kind: ConfigDropIn,
			after: `containerRuntimeEndpoint: "` + shim + `" # the node pool's runtime`},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			n := readFixture(t, tc.fixture)
			l, err := Find(n)
			if err != nil {
				t.Fatal(err)
			}
			if l.Endpoint != tc.endpoint || l.Place.Path != tc.path || l.Place.Kind != tc.kind || l.Place.Insert != tc.insert {
				t.Fatalf("Find = %+v, want endpoint %s in %s (%s, insert %v)", l, tc.endpoint, tc.path, tc.kind, tc.insert)
			}
			e, err := Point(n, l, shim)
			if err != nil {
				t.Fatal(err)
			}
			if e.From != tc.endpoint || e.To != shim || e.Path != tc.path || e.Reload() != (tc.kind == UnitFile) {
				t.Errorf("edit %s: %s -> %s (reload %v)", e.Path, e.From, e.To, e.Reload())
			}
			if !containsLine(e.After, tc.after) {
				t.Errorf("changed %s:\n%s\nwant the line %q", e.Path, e.After, tc.after)
			}
			// Nothing else changes: the file differs by the endpoint alone.
			if rest := strings.Replace(string(e.After), tc.after+"\n", "", 1); !tc.insert && rest == string(e.After) {
				t.Errorf("the changed line is not in the file")
			}
			if d := len(e.After) - len(e.Before); !tc.insert && d != len(shim)-len(tc.endpoint) {
				t.Errorf("the file grew by %d bytes, want %d (the endpoint's length change)", d, len(shim)-len(tc.endpoint))
			}

			// The way back: the bytes as they were...
			back, changed, err := e.Revert(e.After)
			if err != nil || !changed || !bytes.Equal(back, e.Before) {
				t.Errorf("Revert of the file as changed: %v %v\n%s", changed, err, back)
			}
			if _, changed, err := e.Revert(e.Before); changed || err != nil {
				t.Errorf("Revert of the original file: changed %v, %v", changed, err)
			}
			// ...or, when the file changed since, the endpoint set back
			// where it stands.
			edited := append(append([]byte(nil), e.After...), "# changed since\n"...)
			back, changed, err = e.Revert(edited)
			if err != nil || !changed {
				t.Fatalf("Revert of a file changed since: %v %v", changed, err)
			}
			n2 := withFile(n, e.Path, e.Kind, back)
			if _, ok := parseArgs(n.Argv).last(Flag); ok {
				n2.Argv = withLastFlag(n.Argv, tc.endpoint)
			}
			if l2, err := Find(n2); err != nil || l2.Endpoint != tc.endpoint {
				t.Errorf("after Revert of a file changed since: %+v %v, want %s", l2, err, tc.endpoint)
			}
			// A file that no longer names the shim has nothing to revert.
			if _, changed, err := e.Revert([]byte("# rewritten by someone else\n")); changed || !errors.Is(err, ErrNotPointed) {
				t.Errorf("Revert of a rewritten file: changed %v, %v; want %v", changed, err, ErrNotPointed)
			}
		})
	}
}

// TestFindRefuses: layouts the installer does not change, each with a
// message an operator can act on.
func TestFindRefuses(t *testing.T) {
	for _, tc := range []struct{ fixture, want string }{
		{"no-config", "neither --container-runtime-endpoint nor --config"},
		{"vendor-unit", "/usr/lib/systemd/system/kubelet.service (unit file), under /usr, which this installer does not change"},
		{"two-places", "is set in 2 places (/var/lib/kubelet/kubeadm-flags.env, /etc/default/kubelet): set it in one"},
		{"invisible", "which none of the files its unit reads sets (/usr/lib/systemd/system/kubelet.service)"},
		{"json-config", "is JSON or a flow mapping without containerRuntimeEndpoint"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			l, err := Find(readFixture(t, tc.fixture))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Find = %+v, %v; want an error with %q", l, err, tc.want)
			}
		})
	}
}

func TestFindConfigForms(t *testing.T) {
	const head = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
	for _, tc := range []struct {
		desc, config string
		want         string // endpoint, or "error: ..." for a refusal
	}{
		{"plain", head + "containerRuntimeEndpoint: unix:///a.sock\n", "unix:///a.sock"},
		{"single-quoted", head + "containerRuntimeEndpoint: 'unix:///a.sock'\n", "unix:///a.sock"},
		{"JSON with the key", `{"kind": "KubeletConfiguration", "containerRuntimeEndpoint": "unix:///a.sock"}`, "unix:///a.sock"},
		{"no newline at the end, no key", head + "maxPods: 10", DefaultEndpoint},
		{"a block scalar", head + "containerRuntimeEndpoint: >-\n  unix:///a.sock\n", "error: written in a form"},
		{"not a string", head + "containerRuntimeEndpoint: [a]\n", "error: is not a string"},
		{"another kind", "kind: KubeProxyConfiguration\n", `error: has kind "KubeProxyConfiguration"`},
		{"not YAML", "kind: [\n", "error: /c.yaml (KubeletConfiguration): yaml"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			n := Node{Argv: []string{"kubelet", "--config", "/c.yaml"}, Files: []File{{Path: "/c.yaml", Kind: ConfigFile, Data: []byte(tc.config)}}}
			l, err := Find(n)
			if want, ok := strings.CutPrefix(tc.want, "error: "); ok {
				if err == nil || !strings.Contains(err.Error(), want) {
					t.Fatalf("Find = %+v, %v; want an error with %q", l, err, want)
				}
				return
			}
			if err != nil || l.Endpoint != tc.want {
				t.Fatalf("Find = %+v, %v; want %s", l, err, tc.want)
			}
			e, err := Point(n, l, shim)
			if err != nil {
				t.Fatal(err)
			}
			if l2, err := Find(withFile(n, "/c.yaml", ConfigFile, e.After)); err != nil || l2.Endpoint != shim {
				t.Errorf("changed:\n%s\nFind = %+v, %v", e.After, l2, err)
			}
		})
	}
}

func TestArgs(t *testing.T) {
	for _, tc := range []struct {
		argv []string
		want string
		ok   bool
	}{
		{[]string{"kubelet", "--container-runtime-endpoint=a", "--container-runtime-endpoint", "b"}, "b", true},
		{[]string{"kubelet", "--container_runtime_endpoint=a"}, "a", true},
		{[]string{"kubelet", "--", "--container-runtime-endpoint=a"}, "", false},
		{[]string{"kubelet", "--container-runtime-endpoint"}, "", false},
		{[]string{"--container-runtime-endpoint=argv0-is-the-program"}, "", false},
	} {
		got, ok := parseArgs(tc.argv).last(Flag)
		if got != tc.want || ok != tc.ok {
			t.Errorf("%q: %q %v, want %q %v", tc.argv, got, ok, tc.want, tc.ok)
		}
		if ok {
			if got, _ := parseArgs(withLastFlag(tc.argv, "x")).last(Flag); got != "x" {
				t.Errorf("withLastFlag(%q) = %q", tc.argv, withLastFlag(tc.argv, "x"))
			}
		}
	}
}

func TestPointRefusesOddEndpoints(t *testing.T) {
	n := readFixture(t, "kubeadm-flags")
	l, err := Find(n)
	if err != nil {
		t.Fatal(err)
	}
	for _, to := range []string{"", "unix:///a b.sock", `unix:///a".sock`} {
		if _, err := Point(n, l, to); err == nil {
			t.Errorf("Point to %q: no error", to)
		}
	}
}

func withFile(n Node, path string, kind Kind, data []byte) Node {
	out := Node{Argv: n.Argv, Files: append([]File(nil), n.Files...)}
	for i, f := range out.Files {
		if f.Path == path && f.Kind == kind {
			out.Files[i].Data = data
		}
	}
	return out
}

func containsLine(b []byte, line string) bool {
	for _, l := range strings.Split(string(b), "\n") {
		if l == line {
			return true
		}
	}
	return false
}
