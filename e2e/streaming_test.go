//go:build e2e

package e2e

import (
	"errors"
	"io"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// streamingGate is the kubelet feature gate (k8s.io/kubernetes
// pkg/features, alpha and off by default from 1.36) that makes the
// kubelet list pods, containers, stats and images through the streaming
// RPCs of cri-api v0.36 and later (StreamPodSandboxes, StreamContainers,
// StreamImages, ...) instead of the unary List calls. Its CRI client falls
// back to the unary calls for good when the runtime answers a stream
// Unimplemented.
const streamingGate = "CRIListStreaming"

// The kubelet with CRIListStreaming on, in front of the shim: it runs a pod
// and a targeted debug container. The shim intercepts no streaming list
// method: it forwards them, and counts each call by method and code.
//   - Where containerd implements them (2.4), the streams reach it and
//     answer OK, and the kubelet no longer makes the unary list calls.
//   - Where containerd answers Unimplemented (2.3, with kubelet 1.36 on
//     make e2e-containerd-2.3; 2.0's kubelet 1.35 has no gate, so the test
//     skips there), the shim passes the code back, the kubelet says it
//     falls back, and its lists go on unary.
//
// The gate is on for a dedicated kubelet run, the kubelet restarted with
// it and again without it afterwards, not for the whole leg: it is alpha,
// so every other scenario keeps the kubelet as nodes run it, and a restart
// costs a few seconds.
func TestCRIListStreaming(t *testing.T) {
	requireMinor(t, "kubelet", kubeletVersion(t), 36, "the "+streamingGate+" gate is there from 1.36; older kubelets refuse it as unknown")
	streams := backendStreams(t)
	// From before the restart: the kubelet's first lists decide the fallback.
	logFrom, before := fileSize(t, kube.KubeletLog()), shimCalls(t)
	restartKubelet(t, map[string]bool{streamingGate: true})
	t.Cleanup(func() { restartKubelet(t, nil) })

	app, appNS := startApp(t, podSpec{name: "streaming"})
	dbg, out := debug(t, "streaming", "dbg-streaming", busyboxImage, "--target=app")
	checkTargeted(t, app, dbg, appNS, out)
	if p := getPod(t, "streaming"); !p.ready() {
		t.Errorf("pod streaming is not Ready after the debug container ran")
	}

	// The kubelet relists every second: a few relists more.
	mid := shimCalls(t)
	time.Sleep(4 * time.Second)
	after := shimCalls(t)
	kubeletSays := string(readFrom(t, kube.KubeletLog(), logFrom))
	lists := map[string]string{"StreamPodSandboxes": "ListPodSandbox", "StreamContainers": "ListContainers"}
	for stream, unary := range lists {
		fallback := stream + " not implemented, falling back to " + unary
		t.Logf("through the shim since the kubelet restarted: %s OK %.0f, Unimplemented %.0f; %s OK %.0f (%.0f in the last 4 s)",
			stream, after.since(before, stream, "OK"), after.since(before, stream, "Unimplemented"),
			unary, after.since(before, unary, "OK"), after.since(mid, unary, "OK"))
		if streams {
			if n := after.since(mid, stream, "OK"); n == 0 {
				t.Errorf("no %s call reached containerd through the shim in 4 s of relists (before: %.0f)", stream, after.since(before, stream, "OK"))
			}
			if n := after.sinceAll(mid, unary); n != 0 {
				t.Errorf("the kubelet still made %.0f %s calls in 4 s with %s on", n, unary, streamingGate)
			}
			if n := after.sinceAll(before, stream) - after.since(before, stream, "OK"); n != 0 {
				t.Errorf("%.0f %s calls through the shim did not answer OK", n, stream)
			}
			if strings.Contains(kubeletSays, fallback) {
				t.Errorf("the kubelet fell back (%q) though containerd implements %s", fallback, stream)
			}
			continue
		}
		if n := after.since(mid, unary, "OK"); n == 0 {
			t.Errorf("no %s call in 4 s of relists: the kubelet did not fall back to the unary call", unary)
		}
		if n := after.sinceAll(mid, stream); n != 0 {
			t.Errorf("the kubelet still made %.0f %s calls after containerd answered Unimplemented", n, stream)
		}
	}
	if !streams {
		var unimplemented float64
		var said bool
		for stream, unary := range lists {
			unimplemented += after.since(before, stream, "Unimplemented")
			said = said || strings.Contains(kubeletSays, stream+" not implemented, falling back to "+unary)
		}
		if unimplemented == 0 {
			t.Errorf("no streaming list call was answered Unimplemented through the shim")
		}
		if !said {
			t.Errorf("the kubelet's log does not say it fell back to the unary list calls")
		}
	}
}

// backendStreams reports whether containerd itself (asked directly, not
// through the shim) implements StreamPodSandboxes.
func backendStreams(t *testing.T) bool {
	t.Helper()
	s, err := direct.Runtime.StreamPodSandboxes(ctx(t), &runtimeapi.StreamPodSandboxesRequest{})
	for err == nil {
		_, err = s.Recv()
	}
	switch {
	case errors.Is(err, io.EOF):
		t.Logf("containerd implements StreamPodSandboxes")
		return true
	case status.Code(err) == codes.Unimplemented:
		t.Logf("containerd answers StreamPodSandboxes %v", err)
		return false
	}
	t.Fatalf("containerd StreamPodSandboxes: %v", err)
	return false
}

// restartKubelet restarts the kubelet with these feature gates.
func restartKubelet(t *testing.T, gates map[string]bool) {
	t.Helper()
	start := time.Now()
	if err := kube.RestartKubelet(ctx(t), gates); err != nil {
		t.Fatalf("restart the kubelet with feature gates %v: %v", gates, err)
	}
	t.Logf("kubelet restarted with feature gates %v in %s", gates, time.Since(start).Round(100*time.Millisecond))
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// readFrom is path's content from offset on.
func readFrom(t *testing.T, path string, offset int64) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if offset > int64(len(b)) {
		return nil
	}
	return b[offset:]
}
