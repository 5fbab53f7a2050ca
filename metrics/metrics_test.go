package metrics

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
)

// scrape returns the exposition text of r.
func scrape(t *testing.T, r *Recorder) string {
	t.Helper()
	rec := httptest.NewRecorder()
	r.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("/metrics: %d %s", rec.Code, rec.Body)
	}
	return rec.Body.String()
}

func TestCall(t *testing.T) {
	r := New("v1.2.3", "")
	for _, c := range []struct {
		method string
		code   codes.Code
	}{
		{"/runtime.v1.RuntimeService/Version", codes.OK},
		{"/runtime.v1.RuntimeService/Version", codes.OK},
		{"/runtime.v1.RuntimeService/CreateContainer", codes.FailedPrecondition},
		{"/runtime.v1.ImageService/PullImage", codes.OK},
		{"/runtime.v1.RuntimeService/GetContainerEvents", codes.Canceled},
		{"/runtime.v1.RuntimeService/FutureRPC", codes.OK},      // newer than this build
		{"/x.Evil/" + strings.Repeat("a", 200), codes.Code(99)}, // bounded labels
	} {
		r.Call(c.method, c.code, 3*time.Millisecond)
	}
	text := scrape(t, r)
	for _, want := range []string{
		`cri_nstarget_requests_total{code="OK",method="Version",mode="proxy"} 2`,
		`cri_nstarget_requests_total{code="FailedPrecondition",method="CreateContainer",mode="proxy"} 1`,
		`cri_nstarget_requests_total{code="OK",method="PullImage",mode="proxy"} 1`,
		`cri_nstarget_requests_total{code="Canceled",method="GetContainerEvents",mode="proxy"} 1`,
		`cri_nstarget_requests_total{code="OK",method="unknown",mode="proxy"} 1`,
		`cri_nstarget_requests_total{code="Unknown",method="unknown",mode="proxy"} 1`,
		`cri_nstarget_request_duration_seconds_bucket{method="Version",mode="proxy",le="0.005"} 2`,
		`cri_nstarget_request_duration_seconds_bucket{method="Version",mode="proxy",le="0.0025"} 0`,
		`cri_nstarget_request_duration_seconds_count{method="CreateContainer",mode="proxy"} 1`,
		`cri_nstarget_build_info{goversion="go`,
		`version="v1.2.3"} 1`,
		`go_goroutines `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, "aaaa") || strings.Contains(text, "Evil") {
		t.Error("an unknown method name became a label value")
	}
}

// The hot path allocates nothing once a method and code have been seen.
func TestCallDoesNotAllocate(t *testing.T) {
	r := New("test", "")
	m := "/runtime.v1.RuntimeService/ListContainers"
	r.Call(m, codes.OK, time.Millisecond)
	r.Call("/other/Thing", codes.OK, time.Millisecond)
	if n := testing.AllocsPerRun(1000, func() {
		r.Call(m, codes.OK, time.Millisecond)
		r.Call("/other/Thing", codes.OK, time.Millisecond)
	}); n != 0 {
		t.Errorf("Call allocates %v times per call", n)
	}
}

func BenchmarkCall(b *testing.B) {
	r := New("bench", "")
	m := "/runtime.v1.RuntimeService/ListContainers"
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			r.Call(m, codes.OK, time.Millisecond)
		}
	})
}

func TestTargeting(t *testing.T) {
	r := New("test", "")
	r.Targeting("pid", "create", "targeted", "none")
	r.Targeting("pid", "create", "targeted", "none")
	r.Targeting("ipc", "create", "fallback", "target_not_running")
	r.Targeting("pid", "start", "refused", "namespace_gone")
	text := scrape(t, r)
	for _, want := range []string{
		`cri_nstarget_targeting_total{mode="proxy",namespace="pid",reason="none",result="targeted",stage="create"} 2`,
		`cri_nstarget_targeting_total{mode="proxy",namespace="ipc",reason="target_not_running",result="fallback",stage="create"} 1`,
		`cri_nstarget_targeting_total{mode="proxy",namespace="pid",reason="namespace_gone",result="refused",stage="start"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

// The plugin mode's metrics say so, each of them: the same series, with
// the label mode="plugin"; the Go runtime's and the process's carry none.
func TestModeLabel(t *testing.T) {
	r := New("test", "plugin")
	r.Targeting("pid", "create", "fallback", "pid_not_in_pod")
	r.TargetingPath("none")
	text := scrape(t, r)
	for _, want := range []string{
		`cri_nstarget_targeting_total{mode="plugin",namespace="pid",reason="pid_not_in_pod",result="fallback",stage="create"} 1`,
		`cri_nstarget_targeting_path{mode="plugin",path="nri"} 0`,
		`cri_nstarget_build_info{goversion="go`,
		"go_goroutines ",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if strings.Contains(text, `mode="proxy"`) {
		t.Error(`the plugin mode's metrics say mode="proxy"`)
	}
}

func TestPins(t *testing.T) {
	r := New("test", "")
	var err error
	r.WatchPins(func() (map[string]int, error) { return map[string]int{"pid": 3, "ipc": 1}, err })
	text := scrape(t, r)
	for _, want := range []string{`cri_nstarget_pins{mode="proxy",namespace="pid"} 3`, `cri_nstarget_pins{mode="proxy",namespace="ipc"} 1`} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	// An unreadable pin dir costs that gauge, not the scrape.
	err = errors.New("permission denied")
	text = scrape(t, r)
	if strings.Contains(text, "cri_nstarget_pins{") || !strings.Contains(text, "cri_nstarget_build_info") {
		t.Errorf("with a failing pin count, /metrics =\n%s", text)
	}
}

func TestHealthz(t *testing.T) {
	for _, tc := range []struct {
		desc string
		err  error
		code int
		body string
	}{
		{"backend answers", nil, http.StatusOK, "ok\n"},
		{"backend down", errors.New("backend CRI Version: connection refused"), http.StatusServiceUnavailable, "unhealthy: backend CRI Version: connection refused\n"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			srv := httptest.NewServer(Healthz(func(context.Context) error { return tc.err }))
			defer srv.Close()
			resp, err := http.Get(srv.URL)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code || string(b) != tc.body {
				t.Errorf("/healthz = %d %q, want %d %q", resp.StatusCode, b, tc.code, tc.body)
			}
		})
	}
}
