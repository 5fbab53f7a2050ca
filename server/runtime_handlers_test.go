package server

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// What containerd's verbose Status says of its runtimes, on each version
// (testdata: the "config" each answered in the integration harness, with a
// second runtime, nojoin, of runc's type behind a wrapper binary, and kata,
// a VM runtime's type).
func TestRuntimesOf(t *testing.T) {
	files, _ := filepath.Glob("testdata/status-config-*.json")
	if len(files) == 0 {
		t.Fatal("no testdata/status-config-*.json")
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			rts, def, err := runtimesOf(map[string]string{"config": string(b)})
			if err != nil {
				t.Fatal(err)
			}
			if def != "runc" || rts["runc"] != "io.containerd.runc.v2" || rts["nojoin"] != "io.containerd.runc.v2" || rts["kata"] != "io.containerd.kata.v2" {
				t.Errorf("runtimes %v, default %q", rts, def)
			}
		})
	}
	for _, info := range []map[string]string{nil, {"config": "{}"}, {"config": "not json"}} {
		if _, _, err := runtimesOf(info); err == nil {
			t.Errorf("runtimesOf(%v) says something", info)
		}
	}
}

// Whether a handler's runtime joins namespace paths: the configured names,
// auto (containerd's runtime type not runc's), and what verification saw,
// which is kept in the state dir across restarts of the shim.
func TestHandlersCannot(t *testing.T) {
	config, err := os.ReadFile("testdata/status-config-2.4.2.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		configured string
		cannot     []string // of runc, nojoin, kata, unknown
	}{
		{"auto", []string{"kata"}},
		{"auto,nojoin", []string{"nojoin", "kata"}},
		{"nojoin", []string{"nojoin"}},
		{"", nil},
	} {
		t.Run(tc.configured, func(t *testing.T) {
			var h *handlers
			r := newRig(t, false, withHandlers(t, tc.configured, &h))
			r.backend.config = string(config)
			if err := h.rebuild(context.Background()); err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, name := range []string{"runc", "nojoin", "kata", "unknown"} {
				if why := h.cannot(name); why != "" {
					got = append(got, name)
					if !strings.Contains(why, name) {
						t.Errorf("cannot(%s) = %q, which does not name it", name, why)
					}
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.cannot, ",") {
				t.Errorf("cannot join: %v, want %v", got, tc.cannot)
			}
		})
	}
	dir := t.TempDir()
	log := logrus.NewEntry(logrus.New())
	h := newHandlers(nil, log, "", filepath.Join(dir, "h.json"))
	h.learn("vmrun", "container dbg started outside the pid namespace its spec named")
	if again := newHandlers(nil, log, "", filepath.Join(dir, "h.json")); !strings.Contains(again.cannot("vmrun"), "started outside") {
		t.Errorf("after a restart: %q, want what verification saw kept", again.cannot("vmrun"))
	}
}

// RunPodSandbox goes to the backend byte for byte, and teaches the shim
// the pod's runtime handler; after a restart (an empty table) the handler
// is asked for (PodSandboxStatus), or rebuilt from ListPodSandbox. A TARGET
// create in a pod whose handler cannot join falls back before anything is
// made, on both paths, and strict mode refuses it.
func TestHandlerFallbackBeforeCreate(t *testing.T) {
	eachPath(t, func(t *testing.T, newRig rigMaker) {
		for _, strict := range []bool{false, true} {
			r := newRig(t, strict, withHandlers(t, "auto,vmrun", nil))
			r.runPod(t, "sb1", "vmrun")
			r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
			before := r.backendCalls("PodSandboxStatus")
			id, err := r.create(t, withPod(createReq("sb1", pidTarget("app1"))))
			if strict {
				if codeOf(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "the pod's runtime handler vmrun does not join namespace paths") {
					t.Errorf("strict: %v, want FailedPrecondition saying vmrun does not join", err)
				}
				if n := r.backendContainers(); n != 1 {
					t.Errorf("strict: the backend holds %d containers, want the target alone", n)
				}
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			rec := r.record(t, id)
			if ns := rec.Namespaces["pid"]; ns.Result != oci.Fallback || ns.ReasonKind != string(reasonRuntimeCannotJoin) || ns.Path != "" || r.pinned(id) || len(r.opened) != 0 {
				t.Errorf("record %+v, pins %v, opened %v: want a fallback runtime_cannot_join with nothing opened or pinned", ns, r.pinned(id), r.opened)
			}
			if r.backendCalls("PodSandboxStatus") != before {
				t.Error("asked the backend for a handler RunPodSandbox gave")
			}
			e, ok := targetingEvent("dbg", "create", rec)
			if !ok || !strings.Contains(e.Message, "the pod's runtime handler vmrun does not join namespace paths") {
				t.Errorf("event %+v, want it to name the handler", e)
			}
			// after a restart: the table is rebuilt, and a pod not in it asked for
			h := r.handlersTable(t, "vmrun")
			if hd, ok := h.of(context.Background(), "sb1"); hd != "vmrun" || !ok || r.backendCalls("PodSandboxStatus") != before+1 {
				t.Errorf("of(sb1) after a restart = %q %v, want vmrun asked for once", hd, ok)
			}
			h = r.handlersTable(t, "vmrun")
			if err := h.rebuild(context.Background()); err != nil || h.pods["sb1"] != "vmrun" {
				t.Errorf("rebuild: %v, %v", err, h.pods)
			}
		}
	})
}

// The shim reads runtime_handler off the request's bytes, as protobuf does
// (the last occurrence wins), and forwards them as they came: out of
// order, a field twice, an unknown field, all reach the backend.
func TestRunPodSandboxForwardsBytes(t *testing.T) {
	var h *handlers
	r := newRig(t, false, withHandlers(t, "", &h))
	cfg, err := proto.Marshal(&runtimeapi.PodSandboxConfig{Metadata: &runtimeapi.PodSandboxMetadata{Name: "sb2"}, Labels: map[string]string{"b": "2", "a": "1"}})
	if err != nil {
		t.Fatal(err)
	}
	var raw []byte
	raw = protowire.AppendBytes(protowire.AppendTag(raw, 2, protowire.BytesType), []byte("runc"))
	raw = protowire.AppendBytes(protowire.AppendTag(raw, 1, protowire.BytesType), cfg)
	raw = protowire.AppendBytes(protowire.AppendTag(raw, 2, protowire.BytesType), []byte("kata"))
	raw = protowire.AppendBytes(protowire.AppendTag(raw, 100, protowire.BytesType), []byte("x")) // unknown to this cri-api
	var got []byte
	_, err = r.server.target.runPodSandbox(context.Background(), raw, func(_ context.Context, b []byte) ([]byte, error) {
		got = b
		return proto.Marshal(&runtimeapi.RunPodSandboxResponse{PodSandboxId: "sb2"})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, raw) {
		t.Errorf("forwarded %x, want %x", got, raw)
	}
	if h.pods["sb2"] != "kata" {
		t.Errorf("pods %v, want sb2 of kata (the last occurrence)", h.pods)
	}
}
