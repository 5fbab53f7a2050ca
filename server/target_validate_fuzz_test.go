package server

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/criwire"
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
		if len(p.kinds) > 0 && (validateID(p.target) != nil || p.target != opts.TargetID) {
			t.Fatalf("accepted target %q", p.target)
		}
	})
}

// FuzzValidateID: an accepted id is plain ASCII of bounded length and can
// never name a path outside the pin directory.
func FuzzValidateID(f *testing.F) {
	for _, s := range []string{"abc", "", ".", "..", "a..b", "a/b", "/etc", "a\x00", "é", "-a", "a-", "a.b_c-d", strings.Repeat("f", 129)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		if validateID(id) != nil {
			return
		}
		if id == "" || len(id) > maxIDLen || strings.ContainsAny(id, "/\x00") || strings.Contains(id, "..") {
			t.Fatalf("accepted %q", id)
		}
		for i := 0; i < len(id); i++ {
			if id[i] >= 0x80 {
				t.Fatalf("accepted non-ASCII %q", id)
			}
		}
		if filepath.Dir(filepath.Join("/pins", id, "pid")) != filepath.Join("/pins", id) || filepath.Dir(filepath.Join("/pins", id)) != "/pins" {
			t.Fatalf("%q escapes the pin directory", id)
		}
	})
}
