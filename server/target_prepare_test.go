package server

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
)

// A target given by its full id is resolved through containerd's own
// metadata, not the CRI's ListContainers: another pod's is refused, one
// that is no CRI container (a sandbox, say) is NotFound, and when
// containerd's API fails the CRI resolves it after all. Either way its
// namespaces are opened through its task's pid.
func TestResolveFullID(t *testing.T) {
	full := strings.Repeat("ab", 32)
	for _, tc := range []struct {
		name      string
		lookup    func(string) (string, error)
		code      codes.Code
		listCalls int
	}{
		{"same pod", func(string) (string, error) { return "sb1", nil }, codes.OK, 0},
		{"other pod", func(string) (string, error) { return "sb2", nil }, codes.FailedPrecondition, 0},
		{"not a CRI container", func(string) (string, error) { return "", errNotCRIContainer }, codes.NotFound, 0},
		{"containerd's API fails", func(string) (string, error) { return "", errors.New("unavailable") }, codes.OK, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := buildRigEdit(t, false, nil, false, func(d *deps) { d.lookup = fakeLookup{sandbox: tc.lookup, tasks: d.tasks} })
			r.addTarget(full, "sb1", runtimeapi.ContainerState_CONTAINER_RUNNING)
			open, opened := r.kernel.openNS, 0
			r.kernel.openNS = func(pid int, kinds []namespaces.Kind) ([]*namespaces.Handle, error) {
				opened = pid
				return open(pid, kinds)
			}
			_, err := r.create(t, createReq("sb1", pidTarget(full)))
			if status.Code(err) != tc.code {
				t.Fatalf("create = %v, want %v", err, tc.code)
			}
			if err == nil && opened != 4242 {
				t.Errorf("namespaces opened through pid %d, want the task's, 4242", opened)
			}
			if n := r.backendCalls("ListContainers"); n != tc.listCalls {
				t.Errorf("ListContainers called %d times, want %d", n, tc.listCalls)
			}
		})
	}
	if isFullID(strings.Repeat("AB", 32)) || isFullID("abc") || !isFullID(full) {
		t.Error("isFullID")
	}
}
