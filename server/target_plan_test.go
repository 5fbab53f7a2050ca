package server

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/pins"
)

func TestPlanFor(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		ns    *runtimeapi.NamespaceOption
		code  codes.Code // OK: no error
		kinds []namespaces.Kind
		plan  bool
	}{
		{desc: "no namespace options"},
		{desc: "all POD", ns: &runtimeapi.NamespaceOption{}},
		{desc: "pid CONTAINER, ipc NODE", ns: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER, Ipc: runtimeapi.NamespaceMode_NODE}},
		{desc: "pid TARGET", ns: pidTarget("abc123"), plan: true, kinds: []namespaces.Kind{namespaces.PID}},
		{desc: "pid and ipc TARGET", ns: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, Ipc: runtimeapi.NamespaceMode_TARGET, TargetId: "a.b_c-d"},
			plan: true, kinds: []namespaces.Kind{namespaces.PID, namespaces.IPC}},
		{desc: "ipc TARGET", ns: &runtimeapi.NamespaceOption{Ipc: runtimeapi.NamespaceMode_TARGET, TargetId: "abc"}, plan: true, kinds: []namespaces.Kind{namespaces.IPC}},
		{desc: "unknown pid mode", ns: &runtimeapi.NamespaceOption{Pid: 7}, plan: true},
		{desc: "TARGET without target_id", ns: pidTarget(""), code: codes.InvalidArgument},
		{desc: "network TARGET", ns: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_TARGET, TargetId: "abc"}, code: codes.InvalidArgument},
		{desc: "slash", ns: pidTarget("abc/def"), code: codes.InvalidArgument},
		{desc: "absolute path", ns: pidTarget("/proc/1/ns/pid"), code: codes.InvalidArgument},
		{desc: "dot dot", ns: pidTarget(".."), code: codes.InvalidArgument},
		{desc: "dot dot inside", ns: pidTarget("a..b"), code: codes.InvalidArgument},
		{desc: "leading dash", ns: pidTarget("-rf"), code: codes.InvalidArgument},
		{desc: "trailing dot", ns: pidTarget("abc."), code: codes.InvalidArgument},
		{desc: "NUL", ns: pidTarget("abc\x00def"), code: codes.InvalidArgument},
		{desc: "non-UTF-8", ns: pidTarget("abc\xff"), code: codes.InvalidArgument},
		{desc: "non-ASCII letter", ns: pidTarget("abcé"), code: codes.InvalidArgument},
		{desc: "space", ns: pidTarget("abc def"), code: codes.InvalidArgument},
		{desc: "absurd length", ns: pidTarget(strings.Repeat("a", 1<<20)), code: codes.InvalidArgument},
		{desc: "longest allowed", ns: pidTarget(strings.Repeat("a", pins.MaxIDLen)), plan: true, kinds: []namespaces.Kind{namespaces.PID}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p, err := planFor(asRead(createReq("sb", tc.ns)))
			if got := status.Code(toStatus(err)); got != tc.code {
				t.Fatalf("code = %v (%v), want %v", got, err, tc.code)
			}
			if err != nil {
				if len(err.Error()) > 400 {
					t.Errorf("message is %d bytes long: an absurd id must not be echoed whole", len(err.Error()))
				}
				if !strings.Contains(err.Error(), "debugger") {
					t.Errorf("message %q does not name the container", err)
				}
				return
			}
			if (p != nil) != tc.plan {
				t.Fatalf("plan = %+v, want plan=%v", p, tc.plan)
			}
			if p != nil && strings.Join(kindStrings(p.kinds), ",") != strings.Join(kindStrings(tc.kinds), ",") {
				t.Errorf("kinds = %v, want %v", p.kinds, tc.kinds)
			}
		})
	}
}

func kindStrings(ks []namespaces.Kind) []string {
	var out []string
	for _, k := range ks {
		out = append(out, string(k))
	}
	return out
}
