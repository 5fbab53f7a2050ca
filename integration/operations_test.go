//go:build integration

package integration

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// metricsAddr is the address a shim started with --metrics-address
// 127.0.0.1:0 bound, read from its log line "serving metrics".
func metricsAddr(t *testing.T, logPath string) string {
	t.Helper()
	var addr string
	eventually(t, "the shim to log its metrics address", func() bool {
		addr = harness.MetricsAddr(logPath)
		return addr != ""
	})
	return addr
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// metricValue is the value of the sample with exactly these name and labels
// (in Prometheus' sorted order), or "" if there is none.
func metricValue(text, sample string) string {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, sample+" "); ok {
			return v
		}
	}
	return ""
}

// TestMetricsAndHealth: a shim with --metrics-address counts a targeted
// create, a fallback and the calls with the right labels, shows the pin it
// holds, answers /healthz 200 and serves grpc.health.v1 SERVING on the CRI
// socket.
func TestMetricsAndHealth(t *testing.T) {
	s := startShim(t, "--metrics-address", "127.0.0.1:0")
	base := "http://" + metricsAddr(t, s.LogPath())
	c := shimCRI(s)
	p := runPod(t, c, ownMode)
	app := run(t, c, p, "app", pidOwn, "sleep", "3611")
	dbg := run(t, c, p, "debug", targetOf(app))
	// A target that is created but not started: the debugger falls back.
	idle := mustCreate(t, c, p, "idle", pidOwn)
	fb := mustCreate(t, c, p, "debug-idle", targetOf(idle))
	if r := direct.Info(t, fb).Record(t).Namespaces["pid"]; r.Result != oci.Fallback {
		t.Fatalf("debug-idle record = %+v, want a fallback", r)
	}

	want := map[string]string{
		`cri_nstarget_targeting_total{mode="proxy",namespace="pid",reason="none",result="targeted",stage="create"}`:               "1",
		`cri_nstarget_targeting_total{mode="proxy",namespace="pid",reason="target_not_running",result="fallback",stage="create"}`: "1",
		`cri_nstarget_requests_total{code="OK",method="CreateContainer",mode="proxy"}`:                                            "4",
		`cri_nstarget_requests_total{code="OK",method="StartContainer",mode="proxy"}`:                                             "2",
		`cri_nstarget_requests_total{code="OK",method="RunPodSandbox",mode="proxy"}`:                                              "1",
		`cri_nstarget_pins{mode="proxy",namespace="pid"}`:                                                                         "1",
		`cri_nstarget_pins{mode="proxy",namespace="ipc"}`:                                                                         "0",
		`cri_nstarget_request_duration_seconds_count{method="CreateContainer",mode="proxy"}`:                                      "4",
	}
	// A call is counted just after its response is sent: poll a little.
	var text string
	var wrong []string
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		var code int
		if code, text = httpGet(t, base+"/metrics"); code != http.StatusOK {
			t.Fatalf("/metrics: %d %s", code, text)
		}
		wrong = wrong[:0]
		for sample, v := range want {
			if got := metricValue(text, sample); got != v {
				wrong = append(wrong, fmt.Sprintf("%s = %q, want %s", sample, got, v))
			}
		}
		if len(wrong) == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, w := range wrong {
		t.Error(w)
	}
	if strings.Contains(text, dbg) || strings.Contains(text, app) || strings.Contains(text, p.id) {
		t.Error("/metrics carries a container or sandbox id as a label value")
	}

	if code, body := httpGet(t, base+"/healthz"); code != http.StatusOK || body != "ok\n" {
		t.Errorf("/healthz = %d %q, want 200 ok", code, body)
	}
	hc := healthpb.NewHealthClient(s.Conn)
	for _, svc := range []string{"", "runtime.v1.RuntimeService", "runtime.v1.ImageService"} {
		var st healthpb.HealthCheckResponse_ServingStatus
		eventually(t, "health SERVING for "+svc, func() bool {
			resp, err := hc.Check(ctx(t), &healthpb.HealthCheckRequest{Service: svc})
			st = resp.GetStatus()
			return err == nil && st == healthpb.HealthCheckResponse_SERVING
		})
	}
	// CRI keeps working beside the health service.
	if _, err := s.Runtime.Version(ctx(t), &runtimeapi.VersionRequest{}); err != nil {
		t.Errorf("Version through the shim: %v", err)
	}
}

// TestHealthWithoutBackend: with no containerd behind it, the shim serves,
// /healthz answers 503 and the health service NOT_SERVING. It also runs the
// shim as systemd's Type=notify would: READY=1 once the socket serves,
// STOPPING=1 on SIGTERM, on $NOTIFY_SOCKET.
func TestHealthWithoutBackend(t *testing.T) {
	dir := filepath.Join(tmp, fmt.Sprintf("s%d", shimCount.Add(1)))
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	logPath := filepath.Join(dir, "shim.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	sock := filepath.Join(dir, "cri.sock")
	none := filepath.Join(dir, "no-containerd.sock")
	cmd := exec.Command(shimBin, "--config=", "--listen", "unix://"+sock, "--runtime-endpoint", "unix://"+none,
		"--containerd-address", none, "--state-dir", dir, "--metrics-address", "127.0.0.1:0", "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	notify, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: filepath.Join(dir, "notify.sock"), Net: "unixgram"})
	if err != nil {
		t.Fatal(err)
	}
	cmd.Env = append(os.Environ(), "NOTIFY_SOCKET="+filepath.Join(dir, "notify.sock"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if got := readNotify(t, notify); got != "STOPPING=1" {
			t.Errorf("after SIGTERM the shim notified %q, want STOPPING=1", got)
		}
		notify.Close()
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
			<-exited
			t.Error("shim did not stop on SIGTERM")
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("shim log:\n%s", b)
		}
	})
	if got := readNotify(t, notify); got != "READY=1" {
		t.Errorf("at start the shim notified %q, want READY=1", got)
	}
	base := "http://" + metricsAddr(t, logPath)
	if code, body := httpGet(t, base+"/healthz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "backend CRI Version") {
		t.Errorf("/healthz = %d %q, want 503 naming the backend check", code, body)
	}
	conn, err := harness.Dial("unix://" + sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	eventually(t, "the CRI socket to serve health", func() bool {
		resp, err := hc.Check(ctx(t), &healthpb.HealthCheckRequest{})
		return err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_NOT_SERVING
	})
	if code, text := httpGet(t, base+"/metrics"); code != http.StatusOK || !strings.Contains(text, "cri_nstarget_build_info") {
		t.Errorf("/metrics without a backend = %d", code)
	}
}

// readNotify reads one sd_notify datagram.
func readNotify(t *testing.T, c *net.UnixConn) string {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	b := make([]byte, 256)
	n, err := c.Read(b)
	if err != nil {
		t.Errorf("read sd_notify: %v", err)
	}
	return string(b[:n])
}

// TestUnitCapabilities runs the shim as systemd/cri-nstarget.service.in does:
// root, no_new_privs, capability bounding set limited to the unit's
// CapabilityBoundingSet (read from the unit). It targets an app running as uid 1000 (so
// /proc/<pid>/ns needs CAP_SYS_PTRACE and the liveness probe by
// pidfd_send_signal needs CAP_KILL). With the unit's set, targeting works,
// though it has no CAP_DAC_OVERRIDE or CAP_DAC_READ_SEARCH; without CAP_KILL,
// or without CAP_SYS_PTRACE, it falls back with reason namespace_open_failed.
// (Without CAP_SYS_ADMIN no pin can be mounted: pin_failed.)
func TestUnitCapabilities(t *testing.T) {
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv (util-linux) is missing")
	}
	unitCaps := unitBoundingSet(t)
	if !slices.Equal(unitCaps, []string{"sys_admin", "sys_ptrace", "kill", "chown"}) {
		t.Errorf("the unit's CapabilityBoundingSet is %v; this test and docs/operations.md expect sys_admin, sys_ptrace, kill, chown", unitCaps)
	}
	for _, tc := range []struct {
		desc   string
		caps   []string // the bounding set
		result string
		reason string
	}{
		{"the unit's capabilities", unitCaps, oci.Targeted, "none"},
		{"without CAP_KILL", []string{"sys_admin", "sys_ptrace", "chown"}, oci.Fallback, "namespace_open_failed"},
		{"without CAP_SYS_PTRACE", []string{"sys_admin", "kill", "chown"}, oci.Fallback, "namespace_open_failed"},
		{"without CAP_SYS_ADMIN", []string{"sys_ptrace", "kill", "chown"}, oci.Fallback, "pin_failed"},
		// CAP_CHOWN is for --socket-group alone: TestSocketGroup
	} {
		t.Run(tc.desc, func(t *testing.T) {
			bounding := "-all"
			for _, c := range tc.caps {
				bounding += ",+" + c
			}
			wrapper := filepath.Join(tmp, fmt.Sprintf("caps%d.sh", shimCount.Add(1)))
			script := fmt.Sprintf("#!/bin/sh\nexec setpriv --bounding-set %s --inh-caps -all --no-new-privs -- %s \"$@\"\n", bounding, shimBin)
			if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			s := startShimBinary(t, wrapper, "--metrics-address", "127.0.0.1:0")
			st, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.PID()))
			if !bytes.Contains(st, []byte("NoNewPrivs:\t1")) {
				t.Fatalf("shim runs without no_new_privs:\n%s", st)
			}
			base := "http://" + metricsAddr(t, s.LogPath())
			c := shimCRI(s)
			p := runPod(t, c, ownMode)
			app, err := createCfg(t, c, p, &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: "app"},
				Command:  []string{"sleep", "3612"},
				Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
					NamespaceOptions: pidOwn,
					RunAsUser:        &runtimeapi.Int64Value{Value: 1000},
				}},
			})
			if err != nil {
				t.Fatal(err)
			}
			mustStart(t, c, app)
			dbg := run(t, c, p, "debug", targetOf(app))
			r := direct.Info(t, dbg).Record(t).Namespaces["pid"]
			if r.Result != tc.result {
				t.Errorf("record = %+v, want %s", r, tc.result)
			}
			if r.Result == oci.Fallback {
				t.Logf("fallback reason: %s", r.Reason)
			}
			if tc.result == oci.Targeted {
				if ps := execIn(t, c, dbg, "ps", "-o", "pid,user,args"); !strings.Contains(ps, "sleep 3612") {
					t.Errorf("debug container does not see the app's process:\n%s", ps)
				}
			}
			_, text := httpGet(t, base+"/metrics")
			sample := fmt.Sprintf(`cri_nstarget_targeting_total{mode="proxy",namespace="pid",reason="%s",result="%s",stage="create"}`, tc.reason, tc.result)
			if got := metricValue(text, sample); got != "1" {
				t.Errorf("%s = %q, want 1; fallback reason: %s", sample, got, r.Reason)
			}
		})
	}
}

// unitBoundingSet reads CapabilityBoundingSet= of the systemd unit, in
// setpriv's spelling (CAP_SYS_ADMIN: sys_admin).
func unitBoundingSet(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../systemd/cri-nstarget.service.in")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapabilityBoundingSet="); ok {
			var caps []string
			for _, c := range strings.Fields(v) {
				caps = append(caps, strings.ToLower(strings.TrimPrefix(c, "CAP_")))
			}
			return caps
		}
	}
	t.Fatal("the unit sets no CapabilityBoundingSet")
	return nil
}
