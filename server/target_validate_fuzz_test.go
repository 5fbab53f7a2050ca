package server

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// FuzzPlanFor feeds arbitrary CreateContainerRequest bytes to the
// validation: it must never panic, refuse only with InvalidArgument, accept
// only well-formed target ids, and leave no TARGET or unknown mode for the
// backend after setPodModes.
func FuzzPlanFor(f *testing.F) {
	for _, ns := range []*runtimeapi.NamespaceOption{
		nil, {}, pidTarget("abc"), pidTarget(""), pidTarget("../x"), pidTarget(strings.Repeat("a", 200)),
		{Pid: 3, Ipc: 3, TargetId: "a.b-c_d"}, {Network: 3, TargetId: "x"}, {Pid: 9, Ipc: -1, Network: 5},
	} {
		b, _ := proto.Marshal(createReq("sb", ns))
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		req := new(runtimeapi.CreateContainerRequest)
		if proto.Unmarshal(b, req) != nil {
			return
		}
		opts := req.GetConfig().GetLinux().GetSecurityContext().GetNamespaceOptions()
		p, err := planFor(req)
		if err != nil {
			if c := status.Code(toStatus(err)); c != codes.InvalidArgument {
				t.Fatalf("refused with %v: %v", c, err)
			}
			return
		}
		if p == nil {
			for _, m := range []runtimeapi.NamespaceMode{opts.GetPid(), opts.GetIpc(), opts.GetNetwork()} {
				if m < 0 || m > runtimeapi.NamespaceMode_NODE {
					t.Fatalf("mode %v let through untouched", m)
				}
			}
			return
		}
		if len(p.kinds) > 0 {
			if validateID(p.target) != nil || p.target != opts.GetTargetId() {
				t.Fatalf("accepted target %q", p.target)
			}
		}
		setPodModes(req)
		for _, m := range []runtimeapi.NamespaceMode{opts.GetPid(), opts.GetIpc(), opts.GetNetwork()} {
			if m < 0 || m > runtimeapi.NamespaceMode_NODE {
				t.Fatalf("mode %v forwarded to the backend", m)
			}
		}
		if opts.GetTargetId() != "" {
			t.Fatal("target_id forwarded to the backend")
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
