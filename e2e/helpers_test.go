//go:build e2e

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/cluster"
	"github.com/cri-nstarget/cri-nstarget/internal/critesting"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// ctx is a call's context: two minutes, for kubectl's waits of 90 s.
func ctx(t *testing.T) context.Context {
	t.Helper()
	return critesting.Context(t, 2*time.Minute)
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := kube.Kubectl(ctx(t), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// appCmd prints the container's PID namespace, then its user namespace and
// uid map, then sleeps with an argument no other process has, so that ps
// output shows whether it is visible.
const appSleep = "3600001"

func appCmd() []string {
	return []string{"sh", "-c", "readlink /proc/self/ns/pid; " + userCmd + "; exec sleep " + appSleep}
}

// probeCmd is what every debug container runs: its PID namespace, its user
// namespace and uid map, then the processes it sees.
func probeCmd() []string {
	return []string{"sh", "-c", "readlink /proc/self/ns/pid; " + userCmd + "; ps -o pid,user,args"}
}

// userCmd prints "user:[inode] uid_map: inside outside count", read by
// userLine.
const userCmd = `echo "$(readlink /proc/self/ns/user) uid_map: $(cat /proc/self/uid_map)"`

// userLine is the line of out that userCmd printed, its spaces squeezed.
func userLine(out string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "user:[") {
			return strings.Join(strings.Fields(l), " ")
		}
	}
	return ""
}

// container is a pod's container, as a manifest says it.
type container struct {
	Name            string   `json:"name"`
	Image           string   `json:"image"`
	Command         []string `json:"command"`
	ImagePullPolicy string   `json:"imagePullPolicy"`
}

// podSpec is a pod on the node with no service-account token (no
// controller manager runs to make service accounts).
type podSpec struct {
	name          string
	containers    []container
	restartPolicy string // default Always
	hostUsers     *bool
	runtimeClass  string // default: none (the runtime's default handler)
}

func (p podSpec) manifest() string {
	for i := range p.containers {
		p.containers[i].ImagePullPolicy = "IfNotPresent"
	}
	spec := map[string]any{
		"nodeName":                      cluster.NodeName,
		"automountServiceAccountToken":  false,
		"enableServiceLinks":            false,
		"dnsPolicy":                     "Default",
		"terminationGracePeriodSeconds": 1,
		"restartPolicy":                 p.restartPolicy,
		"containers":                    p.containers,
	}
	if p.restartPolicy == "" {
		spec["restartPolicy"] = "Always"
	}
	if p.hostUsers != nil {
		spec["hostUsers"] = *p.hostUsers
	}
	if p.runtimeClass != "" {
		spec["runtimeClassName"] = p.runtimeClass
	}
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": p.name, "namespace": "default"},
		"spec":     spec,
	})
	return string(b)
}

// runPod creates the pod. It is deleted when the test ends (unless the test
// deleted it).
func runPod(t *testing.T, p podSpec) {
	t.Helper()
	if err := kube.Apply(ctx(t), p.manifest()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if _, err := kube.Kubectl(c, "delete", "pod", p.name, "--grace-period=1", "--wait", "--timeout=50s", "--ignore-not-found"); err != nil {
			t.Errorf("delete pod %s: %v", p.name, err)
		}
	})
}

func waitReady(t *testing.T, pod string) {
	t.Helper()
	if _, err := kube.Kubectl(ctx(t), "wait", "--for=condition=Ready", "pod/"+pod, "--timeout=90s"); err != nil {
		t.Fatalf("%v\n%s", err, describe(t, pod))
	}
}

func describe(t *testing.T, pod string) string {
	out, _ := kube.Kubectl(context.Background(), "describe", "pod", pod)
	return out
}

// containerStatus is the part of a pod's container status the tests read.
type containerStatus struct {
	Name         string `json:"name"`
	ContainerID  string `json:"containerID"`
	RestartCount int    `json:"restartCount"`
	Ready        bool   `json:"ready"`
	State        struct {
		Waiting *struct {
			Reason  string `json:"reason"`
			Message string `json:"message"`
		} `json:"waiting"`
		Running *struct {
			StartedAt string `json:"startedAt"`
		} `json:"running"`
		Terminated *struct {
			ExitCode int    `json:"exitCode"`
			Reason   string `json:"reason"`
		} `json:"terminated"`
	} `json:"state"`
	LastState struct {
		Terminated *struct {
			ContainerID string `json:"containerID"`
		} `json:"terminated"`
	} `json:"lastState"`
}

// id is the runtime's container id (containerID without "containerd://").
func (s containerStatus) id() string {
	_, id, _ := strings.Cut(s.ContainerID, "://")
	return id
}

// lastID is the runtime's id of the container's previous instance, "" if
// none.
func (s containerStatus) lastID() string {
	if s.LastState.Terminated == nil {
		return ""
	}
	_, id, _ := strings.Cut(s.LastState.Terminated.ContainerID, "://")
	return id
}

type podStatus struct {
	Metadata struct {
		UID string `json:"uid"`
	} `json:"metadata"`
	Status struct {
		Phase      string `json:"phase"`
		Conditions []struct {
			Type   string `json:"type"`
			Status string `json:"status"`
		} `json:"conditions"`
		ContainerStatuses          []containerStatus `json:"containerStatuses"`
		EphemeralContainerStatuses []containerStatus `json:"ephemeralContainerStatuses"`
	} `json:"status"`
}

func (p podStatus) ready() bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

func (p podStatus) container(name string) (containerStatus, bool) {
	for _, list := range [][]containerStatus{p.Status.ContainerStatuses, p.Status.EphemeralContainerStatuses} {
		for _, c := range list {
			if c.Name == name {
				return c, true
			}
		}
	}
	return containerStatus{}, false
}

func getPod(t *testing.T, name string) podStatus {
	t.Helper()
	var p podStatus
	if err := json.Unmarshal([]byte(kubectl(t, "get", "pod", name, "-o", "json")), &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitContainer polls the pod until cond holds for the named container's
// status (up to 90 s) and returns that status.
func waitContainer(t *testing.T, pod, name, what string, cond func(containerStatus) bool) containerStatus {
	t.Helper()
	var last containerStatus
	for deadline := time.Now().Add(90 * time.Second); time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		if s, ok := getPod(t, pod).container(name); ok {
			last = s
			if cond(s) {
				return s
			}
		}
	}
	t.Fatalf("timed out waiting for container %s of pod %s to be %s; last status %+v\n%s", name, pod, what, last, describe(t, pod))
	return last
}

func terminated(s containerStatus) bool { return s.State.Terminated != nil }

// debug runs `kubectl debug POD --image=IMAGE --container=NAME ARGS... --
// probeCmd` and returns the debug container's status once it has run, and
// its output.
func debug(t *testing.T, pod, name, image string, args ...string) (containerStatus, string) {
	t.Helper()
	kargs := append([]string{"debug", pod, "--image=" + image, "--container=" + name}, args...)
	kubectl(t, append(append(kargs, "--"), probeCmd()...)...)
	st := waitContainer(t, pod, name, "terminated", terminated)
	if st.State.Terminated.ExitCode != 0 {
		t.Fatalf("debug container %s exited %d: %s", name, st.State.Terminated.ExitCode, logs(t, pod, name))
	}
	return st, logs(t, pod, name)
}

func logs(t *testing.T, pod, name string) string {
	t.Helper()
	return kubectl(t, "logs", pod, "-c", name)
}

// firstLine is the first line of out.
func firstLine(out string) string {
	l, _, _ := strings.Cut(strings.TrimSpace(out), "\n")
	return strings.TrimSpace(l)
}

// expectVia is the path the shim must take to target on this leg
// (NSTARGET_EXPECT_VIA, set by make e2e: "nri" on containerd 2.4 and 2.3,
// whose NRI the harness serves, "update" on 2.0, whose NRI (v0.8) cannot
// adjust namespaces, and on 1.7, which has none enabled); empty checks
// nothing.
var expectVia = os.Getenv("NSTARGET_EXPECT_VIA")

// checkVia fails t when the record of a targeted container says another
// path than expectVia: a leg meant to prove NRI must not pass on the Update
// path's fallback, nor the reverse.
func checkVia(t *testing.T, name string, rec oci.Record) {
	t.Helper()
	if expectVia != "" && rec.Via != expectVia {
		t.Errorf("%s was targeted via %q, want %q on this backend (NSTARGET_EXPECT_VIA)", name, rec.Via, expectVia)
	}
}

// containersNamed lists containerd's containers of the pod sandbox with the
// Kubernetes container name.
func containersNamed(t *testing.T, podUID, name string) []string {
	t.Helper()
	resp, err := direct.Runtime.ListContainers(ctx(t), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{
		LabelSelector: map[string]string{"io.kubernetes.pod.uid": podUID, "io.kubernetes.container.name": name},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range resp.GetContainers() {
		ids = append(ids, fmt.Sprintf("%.12s (%s)", c.GetId(), c.GetState()))
	}
	return ids
}

// minor is the minor version of a "v1.MINOR.PATCH" string, 0 if none.
func minor(version string) int {
	parts := strings.SplitN(strings.TrimPrefix(version, "v"), ".", 3)
	if len(parts) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(parts[1])
	return n
}

// kubeletVersion is what the kubelet reports in the node's status.
func kubeletVersion(t *testing.T) string {
	t.Helper()
	var node struct {
		Status struct {
			NodeInfo struct {
				KubeletVersion string `json:"kubeletVersion"`
			} `json:"nodeInfo"`
		} `json:"status"`
	}
	if err := json.Unmarshal([]byte(kubectl(t, "get", "node", cluster.NodeName, "-o", "json")), &node); err != nil {
		t.Fatal(err)
	}
	return node.Status.NodeInfo.KubeletVersion
}

// kubectlVersion is kubectl's own version (the cluster's binaries are all
// of one release).
func kubectlVersion(t *testing.T) string {
	t.Helper()
	var v struct {
		ClientVersion struct {
			GitVersion string `json:"gitVersion"`
		} `json:"clientVersion"`
	}
	if err := json.Unmarshal([]byte(kubectl(t, "version", "--client", "-o", "json")), &v); err != nil {
		t.Fatal(err)
	}
	return v.ClientVersion.GitVersion
}

// requireMinor skips the test, saying why, when version is older than
// 1.min.
func requireMinor(t *testing.T, what, version string, min int, why string) {
	t.Helper()
	if minor(version) < min {
		t.Skipf("skipping on %s %s: %s", what, version, why)
	}
}

// calls are the shim's cri_nstarget_requests_total (its series carry
// mode="proxy"), by "Method code" (e.g. "StreamPodSandboxes OK").
type calls map[string]float64

var requestsRE = regexp.MustCompile(`^cri_nstarget_requests_total\{code="([^"]*)",method="([^"]*)",mode="proxy"\} (\S+)$`)

// shimCalls is the calls served by the running shim, by method and code.
func shimCalls(t *testing.T) calls {
	t.Helper()
	out := calls{}
	for _, line := range strings.Split(scrape(t), "\n") {
		if sm := requestsRE.FindStringSubmatch(line); sm != nil {
			v, _ := strconv.ParseFloat(sm[3], 64)
			out[sm[2]+" "+sm[1]] = v
		}
	}
	return out
}

// scrape reads the running shim's /metrics, at the address its log gave
// last (each start logs the port it bound).
func scrape(t *testing.T) string {
	t.Helper()
	addr := harness.MetricsAddr(shim.LogPath())
	if addr == "" {
		t.Fatalf("the shim's log has no %q line", "serving metrics")
	}
	c := http.Client{Timeout: 10 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s/metrics: %s", addr, resp.Status)
	}
	return string(text)
}

// since is how many calls of method with code were served after before.
func (c calls) since(before calls, method, code string) float64 {
	return c[method+" "+code] - before[method+" "+code]
}

// sinceAll is since over every code.
func (c calls) sinceAll(before calls, method string) float64 {
	var n float64
	for k, v := range c {
		if strings.HasPrefix(k, method+" ") {
			n += v - before[k]
		}
	}
	return n
}
