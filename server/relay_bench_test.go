package server

import (
	"context"
	"fmt"
	"testing"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// BenchmarkRelay is for profiling the relay's own cost (go test -bench Relay
// -cpuprofile); figures against containerd come from cmd/nstarget-bench.
func BenchmarkRelay(b *testing.B) {
	r := newRig(b, false)
	for i := 0; i < 20; i++ {
		r.backend.containers = append(r.backend.containers, &runtimeapi.Container{Id: fmt.Sprintf("c%04d", i), PodSandboxId: "p"})
	}
	rt := runtimeapi.NewRuntimeServiceClient(r.shim)
	b.SetParallelism(32)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := rt.ListContainers(context.Background(), &runtimeapi.ListContainersRequest{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
