package critesting

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"

	"google.golang.org/grpc"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// fakeRuntime answers the calls this package makes from its fields; any
// other call panics (the embedded nil interface).
type fakeRuntime struct {
	runtimeapi.RuntimeServiceClient
	info      string           // ContainerStatus's verbose "info"
	statusErr error            // ContainerStatus's error
	sandboxes []string         // ListPodSandbox's ids
	listErr   error            // ListPodSandbox's error
	fail      map[string]error // "stop ID" / "remove ID" -> the error
	calls     []string         // "stop ID", "remove ID", in order
}

func (f *fakeRuntime) ContainerStatus(_ context.Context, req *runtimeapi.ContainerStatusRequest, _ ...grpc.CallOption) (*runtimeapi.ContainerStatusResponse, error) {
	if f.statusErr != nil {
		return nil, f.statusErr
	}
	if !req.GetVerbose() {
		return nil, errors.New("not verbose")
	}
	return &runtimeapi.ContainerStatusResponse{Info: map[string]string{"info": f.info}}, nil
}

func (f *fakeRuntime) ListPodSandbox(context.Context, *runtimeapi.ListPodSandboxRequest, ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error) {
	if f.listErr != nil {
		return nil, f.listErr
	}
	resp := &runtimeapi.ListPodSandboxResponse{}
	for _, id := range f.sandboxes {
		resp.Items = append(resp.Items, &runtimeapi.PodSandbox{Id: id})
	}
	return resp, nil
}

func (f *fakeRuntime) StopPodSandbox(_ context.Context, req *runtimeapi.StopPodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.StopPodSandboxResponse, error) {
	return &runtimeapi.StopPodSandboxResponse{}, f.call("stop " + req.GetPodSandboxId())
}

func (f *fakeRuntime) RemovePodSandbox(_ context.Context, req *runtimeapi.RemovePodSandboxRequest, _ ...grpc.CallOption) (*runtimeapi.RemovePodSandboxResponse, error) {
	return &runtimeapi.RemovePodSandboxResponse{}, f.call("remove " + req.GetPodSandboxId())
}

func (f *fakeRuntime) call(c string) error {
	f.calls = append(f.calls, c)
	return f.fail[c]
}

// fakeT is a testing.TB whose Fatalf records the message and ends the
// goroutine, as testing.T's does.
type fakeT struct {
	testing.TB
	fatal    string
	cleanups []func()
}

func (f *fakeT) Helper() {}

func (f *fakeT) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

func (f *fakeT) Fatalf(format string, args ...any) {
	f.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a fakeT on a goroutine of its own and returns what
// Fatalf said, "" if fn returned.
func run(fn func(t testing.TB)) string {
	f := &fakeT{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	for _, c := range f.cleanups {
		c()
	}
	return f.fatal
}
