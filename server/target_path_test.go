package server

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/nriplugin"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// The path of a try, from what is known before its forward.
func TestPathFor(t *testing.T) {
	refused := errors.New("target container \"ghost\" not found")
	for _, tc := range []struct {
		desc                         string
		registered, nriOnly, targets bool
		decided                      error
		want                         path
	}{
		{desc: "registered", registered: true, targets: true, want: pathNRI},
		{desc: "registered, NRI only", registered: true, nriOnly: true, targets: true, want: pathNRI},
		{desc: "not registered", targets: true, want: pathUpdate},
		{desc: "not registered, nothing to join", want: pathUpdate},
		{desc: "not registered, decision refused", targets: true, decided: refused, want: pathRefuse},
		{desc: "NRI only, not registered", nriOnly: true, targets: true, want: pathRefuse},
		{desc: "NRI only, not registered, nothing to join", nriOnly: true, want: pathUpdate},
		{desc: "NRI only, not registered, decision refused", nriOnly: true, decided: refused, want: pathRefuse},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := pathFor(tc.registered, tc.nriOnly, tc.targets, tc.decided); got != tc.want {
				t.Errorf("pathFor = %v, want %v", got, tc.want)
			}
		})
	}
}

// The path is chosen before the forward, and taken: what the backend
// receives (the request with the NRI token, as without NRI, or nothing)
// and how the record was written follow from it.
func TestCreatePathChosenBeforeTheForward(t *testing.T) {
	unknownMode := &runtimeapi.NamespaceOption{Ipc: 9}
	for _, tc := range []struct {
		desc     string
		nri      bool // an NRI rig
		usable   bool // NRI usable (not refused)
		nriOnly  bool
		ns       *runtimeapi.NamespaceOption
		target   string
		want     path
		code     codes.Code // pathRefuse
		msg      string
		wantKind string // the namespace the record says
	}{
		{desc: "NRI usable", nri: true, usable: true, ns: pidTarget("app1"), want: pathNRI, wantKind: "pid"},
		{desc: "NRI usable, NRI only", nri: true, usable: true, nriOnly: true, ns: pidTarget("app1"), want: pathNRI, wantKind: "pid"},
		{desc: "NRI not usable", nri: true, ns: pidTarget("app1"), want: pathUpdate, wantKind: "pid"},
		{desc: "no NRI", ns: pidTarget("app1"), want: pathUpdate, wantKind: "pid"},
		{desc: "NRI only, not usable", nri: true, nriOnly: true, ns: pidTarget("app1"), want: pathRefuse,
			code: codes.Unavailable, msg: "configured to go through NRI only, and NRI is not usable"},
		{desc: "NRI only, not usable, nothing to join", nri: true, nriOnly: true, ns: unknownMode, want: pathUpdate, wantKind: "ipc"},
		{desc: "no NRI, unknown target", ns: pidTarget("ghost"), want: pathRefuse, code: codes.NotFound, msg: `target container "ghost" not found`},
		{desc: "NRI not usable, unknown target", nri: true, ns: pidTarget("ghost"), want: pathRefuse, code: codes.NotFound, msg: `target container "ghost" not found`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			nriOnly := func(d *deps) { d.nriOnly = tc.nriOnly }
			var r *rig
			if tc.nri {
				r = newNRIRigEdit(t, false, nriOnly)
			} else {
				r = buildRigEdit(t, false, nil, false, nriOnly)
			}
			if tc.nri && !tc.usable {
				r.server.nri.Refuse(errors.New("the runtime refused the namespace adjustment"))
			}
			r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
			id, err := r.create(t, createReq("sb1", tc.ns))
			if tc.want == pathRefuse {
				if st := status.Convert(err); st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
					t.Fatalf("create = %v, want %v saying %q", err, tc.code, tc.msg)
				}
				if n := len(r.backend.createdRaw); n != 0 {
					t.Errorf("the backend received %d creates, want none: refused before the forward", n)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if n := len(r.backend.createdRaw); n != 1 {
				t.Fatalf("the backend received %d creates, want 1", n)
			}
			_, token := r.backend.created[0].GetConfig().GetAnnotations()[nriplugin.AnnotationRequest]
			rec := r.record(t, id)
			if rec.Via != tc.want.String() || token != (tc.want == pathNRI) {
				t.Errorf("record via %q, token forwarded %v; want the %v path", rec.Via, token, tc.want)
			}
			if _, ok := rec.Namespaces[tc.wantKind]; !ok {
				t.Errorf("record %+v says nothing of %s", rec, tc.wantKind)
			}
		})
	}
}

// A conflict's retry is a try like the first, through the path chosen for
// it: here the runtime refuses the retry's NRI adjustment (its validator),
// and the create is tried once more through the Update path, as any create
// whose NRI adjustment the runtime refuses, with the conflict's fallback in
// its decision.
func TestCreateNRIConflictRetryTakesTheSamePath(t *testing.T) {
	r := newNRIRig(t, false)
	otherPlugin(t, r, "pid")
	r.addTarget("app1", "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
	calls := 0
	r.backend.nri = func(id string, req *runtimeapi.CreateContainerRequest) error {
		calls++
		if err := r.nriEvent(id, req); err != nil || calls != 2 {
			return err
		}
		// the retry's event was answered; the runtime's validator refuses it
		return errors.New("failed to create containerd container: failed to get NRI adjustment for container: validator: plugin \"other\" attempted restricted namespace adjustment")
	}
	id, err := r.create(t, createReq("sb1", pidTarget("app1")))
	if err != nil {
		t.Fatalf("create = %v, want the Update path after the runtime refused the retry's NRI adjustment", err)
	}
	rec := r.record(t, id)
	if pid := rec.Namespaces["pid"]; rec.Via != ViaUpdate || pid.Result != oci.Fallback || pid.ReasonKind != string(reasonNRIConflict) {
		t.Errorf("record %+v, want the conflict's fallback written through the Update path", rec)
	}
	if n := len(r.backend.createdRaw); n != 3 {
		t.Errorf("the backend received %d creates, want 3: the conflict, the retry refused, the Update path", n)
	}
	if usable, _ := r.server.nri.Usable(); usable {
		t.Error("NRI still used after the runtime refused its adjustment")
	}
	if r.pinned(id) {
		t.Error("pins kept for a container that joins none")
	}
}
