//go:build integration

package integration

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	containers "github.com/containerd/containerd/api/services/containers/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/critesting"
)

// notUTF8 is the env value of issue 23 (ff fe 61 c3): kubelets on cri-api
// ≥ v0.34.9 send env values as bytes, and containerd runs them.
const notUTF8 = "\xff\xfea\xc3"

// oddity is one thing cri-api's Go types cannot carry as a string, put into
// a CreateContainerRequest on the wire: a 4-byte placeholder is marshalled,
// then swapped for bytes that are not UTF-8.
type oddity struct {
	name string
	set  func(cfg *runtimeapi.ContainerConfig, dir string)
}

const placeholder = "~P4~"

var oddities = []oddity{
	{"env", func(cfg *runtimeapi.ContainerConfig, _ string) {
		cfg.Envs = append(cfg.Envs, &runtimeapi.KeyValue{Key: "BLOB", Value: []byte(placeholder)})
	}},
	{"annotation", func(cfg *runtimeapi.ContainerConfig, _ string) {
		cfg.Annotations = map[string]string{"example.com/blob": placeholder}
	}},
	{"label", func(cfg *runtimeapi.ContainerConfig, _ string) {
		cfg.Labels = map[string]string{"blob" + placeholder: "v"}
	}},
	{"mount", func(cfg *runtimeapi.ContainerConfig, dir string) {
		cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{ContainerPath: "/blob", HostPath: filepath.Join(dir, placeholder)})
	}},
	{"unknown fields", func(cfg *runtimeapi.ContainerConfig, dir string) {
		// at every depth the shim walks or rewrites, and in a mount
		cfg.Mounts = append(cfg.Mounts, &runtimeapi.Mount{ContainerPath: "/unknown", HostPath: filepath.Join(dir, "plain")})
		sc := cfg.Linux.SecurityContext
		for _, m := range []proto.Message{cfg, cfg.Metadata, cfg.Linux, sc, sc.NamespaceOptions, cfg.Mounts[len(cfg.Mounts)-1]} {
			m.ProtoReflect().SetUnknown(unknownFields())
		}
	}},
}

// unknownFields: fields no cri-api declares, of each wire type, one of them
// a string that is not UTF-8.
func unknownFields() protoreflect.RawFields {
	b := protowire.AppendVarint(protowire.AppendTag(nil, 1000, protowire.VarintType), 7)
	b = protowire.AppendString(protowire.AppendTag(b, 1001, protowire.BytesType), notUTF8)
	return protowire.AppendFixed32(protowire.AppendTag(b, 1002, protowire.Fixed32Type), 5)
}

// A CreateContainerRequest that containerd takes, with values that are not
// UTF-8 (env, annotation, label, mount) or fields unknown to cri-api, plain
// and with pid TARGET: created directly and through the shim, the outcome is
// the same (both made, or the same status), containerd stores the same
// config but for the namespace options the shim rewrites and its own
// annotation, and the container sees the same env and mounts from inside.
func TestWireFidelity(t *testing.T) {
	s := startShim(t)
	shim := shimCRI(s)
	dir, err := os.MkdirTemp(tmp, "wire-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	// the mount's host directory, under its name that is not UTF-8
	if err := os.Mkdir(filepath.Join(dir, notUTF8), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeFile(filepath.Join(dir, notUTF8, "f"), "through"); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "plain", "inside"), 0o755); err != nil {
		t.Fatal(err)
	}
	// a pod with an app container of its own PID namespace, on each side
	eps := []*struct {
		name string
		c    critesting.CRI
		conn *grpc.ClientConn
		pod  pod
		app  string
	}{{name: "direct", c: direct, conn: directConn}, {name: "shim", c: shim, conn: s.Conn}}
	for _, ep := range eps {
		ep.pod = runPod(t, ep.c, ownMode)
		ep.app = run(t, ep.c, ep.pod, "app", pidOwn)
	}
	for _, o := range oddities {
		for _, targeted := range []bool{false, true} {
			name := o.name + map[bool]string{false: "/plain", true: "/pid TARGET"}[targeted]
			t.Run(name, func(t *testing.T) {
				type result struct {
					err  error
					cfg  map[string]any
					seen string
				}
				var rs []result
				for _, ep := range eps {
					ns := pidOwn
					cname := "wire-" + o.name
					if targeted {
						ns, cname = targetOf(ep.app), cname+"-t"
					}
					raw := oddRequest(t, o, ep.pod, cname, ns, dir)
					var out []byte
					var r result
					if r.err = ep.conn.Invoke(ctx(t), "/runtime.v1.RuntimeService/CreateContainer", &raw, &out, grpc.ForceCodec(rawBytes{})); r.err != nil {
						t.Logf("%s: not created: %v", ep.name, r.err)
						rs = append(rs, r)
						continue
					}
					resp := new(runtimeapi.CreateContainerResponse)
					if err := proto.Unmarshal(out, resp); err != nil {
						t.Fatal(err)
					}
					id := resp.GetContainerId()
					ci, cfg := storedInfo(t, id)
					r.cfg = cfg
					// The Update path reads and rewrites the spec through
					// containerd's own API; where that API cannot return
					// the container at all, the shim falls back to the pod's
					// namespace (spec_update_failed), as it must.
					fellBack := false
					if why := apiRefuses(t, id); targeted && ep.name == "shim" && why != "" && !shimsUseNRI() {
						fellBack = true
						t.Logf("containerd's API cannot return %.12s (%s): on the Update path the shim falls back", id, why)
					}
					_, r.err = ep.c.Runtime.StartContainer(ctx(t), &runtimeapi.StartContainerRequest{ContainerId: id})
					t.Logf("%s: created; started: %v", ep.name, r.err)
					if r.err == nil {
						// what the process is given, read from inside (an
						// exec gets the container's env)
						r.seen = execIn(t, ep.c, id, "sh", "-c", "od -An -c /proc/self/environ | tr -s ' '; ls /blob /unknown 2>&1; cat /blob/f 2>&1; true")
						inApp := nsInside(t, ep.c, id, "pid") == nsInside(t, ep.c, ep.app, "pid")
						switch {
						case targeted && !fellBack && !inApp:
							t.Errorf("%s: the pid TARGET container is not in app's PID namespace", ep.name)
						case fellBack && inApp:
							t.Errorf("%s: the pid TARGET container is in app's PID namespace, though the shim could not rewrite its spec", ep.name)
						}
					}
					if targeted && ep.name == "shim" && !fellBack {
						// the shim did the targeting, not containerd
						if got := ci.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(); got != runtimeapi.NamespaceMode_POD {
							t.Errorf("containerd received pid %v from the shim, want POD", got)
						}
						if p := nsPath(ci, "pid"); filepath.Dir(filepath.Dir(p)) != filepath.Join(s.StateDir(), "pins") {
							t.Errorf("spec pid path %q is not the shim's pin", p)
						}
					}
					rs = append(rs, r)
				}
				d, sh := rs[0], rs[1]
				if status.Code(d.err) != status.Code(sh.err) || status.Convert(d.err).Message() != status.Convert(sh.err).Message() {
					t.Fatalf("direct: %v; through the shim: %v", d.err, sh.err)
				}
				if !reflect.DeepEqual(d.cfg, sh.cfg) {
					dj, _ := json.Marshal(d.cfg)
					sj, _ := json.Marshal(sh.cfg)
					t.Errorf("containerd stored another config through the shim:\ndirect %s\n  shim %s", dj, sj)
				}
				if d.err != nil {
					return
				}
				if d.seen != sh.seen {
					t.Errorf("the container sees another environment through the shim:\ndirect %q\n  shim %q", d.seen, sh.seen)
				}
				if o.name == "env" && !bytes.Contains([]byte(d.seen), []byte("B L O B =")) {
					t.Errorf("env not seen from inside: %q", d.seen)
				}
			})
		}
	}
}

// apiRefuses says why containerd's own containers API (asked directly) cannot
// return container id, or "" when it can. containerd 1.7 stores a CRI label
// that is not UTF-8 as it came, then fails to marshal the container
// (Internal: "string field contains invalid UTF-8"), so no client of that
// API, the shim's Update path included, can read or rewrite its spec.
func apiRefuses(t *testing.T, id string) string {
	t.Helper()
	c := containers.NewContainersClient(directConn)
	_, err := c.Get(metadata.AppendToOutgoingContext(ctx(t), "containerd-namespace", "k8s.io"), &containers.GetContainerRequest{ID: id})
	if err == nil {
		return ""
	}
	return err.Error()
}

// oddRequest is a CreateContainerRequest for busybox in p carrying o.
func oddRequest(t *testing.T, o oddity, p pod, name string, ns *runtimeapi.NamespaceOption, dir string) []byte {
	t.Helper()
	ns = proto.Clone(ns).(*runtimeapi.NamespaceOption)
	cfg := &runtimeapi.ContainerConfig{
		Metadata: &runtimeapi.ContainerMetadata{Name: name},
		Image:    &runtimeapi.ImageSpec{Image: env.BusyboxImage},
		Command:  []string{"sleep", "3600"},
		Envs:     []*runtimeapi.KeyValue{{Key: "PLAIN", Value: []byte("yes")}},
		Linux:    &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{NamespaceOptions: ns}},
	}
	o.set(cfg, dir)
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(&runtimeapi.CreateContainerRequest{PodSandboxId: p.id, SandboxConfig: p.cfg, Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	if n := bytes.Count(b, []byte(placeholder)); n > 1 {
		t.Fatalf("placeholder %d times", n)
	}
	return bytes.Replace(b, []byte(placeholder), []byte(notUTF8), 1)
}

// storedInfo is containerd's verbose ContainerStatus info (as crictl
// inspect shows it) and the ContainerConfig stored in it, without what the
// shim changes on purpose: the namespace options it rewrites and its NRI
// request annotation. The response is read off the wire: its status carries
// the container's labels and annotations as they were given, and cri-api's
// Go types refuse to decode those that are not UTF-8.
func storedInfo(t *testing.T, id string) (critesting.ContainerInfo, map[string]any) {
	t.Helper()
	in, err := proto.Marshal(&runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	if err := directConn.Invoke(ctx(t), "/runtime.v1.RuntimeService/ContainerStatus", &in, &out, grpc.ForceCodec(rawBytes{})); err != nil {
		t.Fatalf("ContainerStatus %s: %v", id, err)
	}
	js := verboseInfo(t, out)
	var ci critesting.ContainerInfo
	var raw struct {
		Config map[string]any `json:"config"`
	}
	if err := json.Unmarshal(js, &ci); err != nil {
		t.Fatalf("verbose info of %s: %v", id, err)
	}
	if err := json.Unmarshal(js, &raw); err != nil {
		t.Fatal(err)
	}
	cfg := raw.Config
	if sc, ok := cfg["linux"].(map[string]any)["security_context"].(map[string]any); ok {
		if ns, ok := sc["namespace_options"].(map[string]any); ok {
			delete(ns, "pid")
			delete(ns, "target_id")
		}
	}
	if a, ok := cfg["annotations"].(map[string]any); ok {
		if delete(a, "io.cri-nstarget.request"); len(a) == 0 {
			delete(cfg, "annotations")
		}
	}
	return ci, cfg
}

// verboseInfo is info["info"] of a ContainerStatusResponse on the wire
// (field 2, a map<string, string>).
func verboseInfo(t *testing.T, b []byte) []byte {
	t.Helper()
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			t.Fatal(protowire.ParseError(n))
		}
		b = b[n:]
		if num != 2 || typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				t.Fatal(protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		entry, n := protowire.ConsumeBytes(b)
		if n < 0 {
			t.Fatal(protowire.ParseError(n))
		}
		b = b[n:]
		var key, value []byte
		for len(entry) > 0 {
			num, _, m := protowire.ConsumeTag(entry)
			v, k := protowire.ConsumeBytes(entry[m:])
			if m < 0 || k < 0 {
				t.Fatal("malformed info entry")
			}
			if num == 1 {
				key = v
			} else {
				value = v
			}
			entry = entry[m+k:]
		}
		if string(key) == "info" {
			return value
		}
	}
	t.Fatal("no verbose info")
	return nil
}
