package server

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/pins"
)

// FuzzPlanFor feeds arbitrary CreateContainerRequest bytes to the
// validation: it must never panic, refuse only with InvalidArgument, accept
// only well-formed target ids, and ask for nothing when every mode is known.
// (criwire.FuzzCreate holds the reading and the rewrite to protobuf-go.)
func FuzzPlanFor(f *testing.F) {
	for _, ns := range []*runtimeapi.NamespaceOption{
		nil, {}, pidTarget("abc"), pidTarget(""), pidTarget("../x"), pidTarget(strings.Repeat("a", 200)),
		{Pid: 3, Ipc: 3, TargetId: "a.b-c_d"}, {Network: 3, TargetId: "x"}, {Pid: 9, Ipc: -1, Network: 5},
	} {
		b, _ := proto.Marshal(createReq("sb", ns))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := criwire.ReadCreate(b)
		if err != nil {
			return // forwarded as it came
		}
		p, err := planFor(req)
		if err != nil {
			if c := status.Code(toStatus(err)); c != codes.InvalidArgument {
				t.Fatalf("refused with %v: %v", c, err)
			}
			return
		}
		opts := req.Namespaces
		if p == nil {
			if opts != nil && (!criwire.Known(opts.PID) || !criwire.Known(opts.IPC) || !criwire.Known(opts.Network)) {
				t.Fatalf("modes %+v let through untouched", opts)
			}
			return
		}
		if len(p.kinds) > 0 && (pins.ValidateID(p.target) != nil || p.target != opts.TargetID) {
			t.Fatalf("accepted target %q", p.target)
		}
	})
}
