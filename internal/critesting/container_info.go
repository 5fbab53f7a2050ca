package critesting

import (
	"encoding/json"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// ContainerInfo is the part of containerd's verbose ContainerStatus info
// the tests read: the task's pid (0 when none runs), the CreateContainer
// request containerd received (config) and the spec it runs (runtimeSpec).
type ContainerInfo struct {
	Pid         int                         `json:"pid"`
	Config      *runtimeapi.ContainerConfig `json:"config"`
	RuntimeSpec *specs.Spec                 `json:"runtimeSpec"`
}

// Info is the verbose info of container id, as the endpoint c (containerd
// itself, not a shim, in the suites) gives it. It fails t when the call
// fails or the info has no spec.
func (c CRI) Info(t testing.TB, id string) ContainerInfo {
	t.Helper()
	resp, err := c.Runtime.ContainerStatus(Context(t, CallTimeout), &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: true})
	if err != nil {
		t.Fatalf("ContainerStatus %s: %v", id, err)
	}
	var ci ContainerInfo
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &ci); err != nil {
		t.Fatalf("verbose info of %s: %v", id, err)
	}
	if ci.RuntimeSpec == nil {
		t.Fatalf("verbose info of %s has no runtimeSpec: %q", id, resp.GetInfo()["info"])
	}
	return ci
}

// Record is the shim's targeting record in the spec's annotations. It fails
// t when there is none or it does not parse.
func (ci ContainerInfo) Record(t testing.TB) oci.Record {
	t.Helper()
	rec, ok, err := oci.ParseRecord(ci.RuntimeSpec.Annotations)
	if err != nil || !ok {
		t.Fatalf("no %s annotation: ok=%v err=%v (annotations %v)", oci.AnnotationTargeting, ok, err, ci.RuntimeSpec.Annotations)
	}
	return rec
}
