package critesting

import (
	"context"
	"testing"
	"time"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// CallTimeout bounds one call made with Context by Info, and integration/'s
// calls.
const CallTimeout = time.Minute

// CRI is one CRI endpoint: containerd directly, or a shim.
type CRI struct {
	Runtime runtimeapi.RuntimeServiceClient
	Images  runtimeapi.ImageServiceClient
}

// New is the endpoint at the other end of conn.
func New(conn grpc.ClientConnInterface) CRI {
	return CRI{Runtime: runtimeapi.NewRuntimeServiceClient(conn), Images: runtimeapi.NewImageServiceClient(conn)}
}

// Context is a call's context: cancelled after timeout, or when t ends.
func Context(t testing.TB, timeout time.Duration) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return c
}
