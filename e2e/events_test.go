//go:build e2e

package e2e

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/cluster"
)

// The shim's Events on pods, under the kubelet's own identity on an
// apiserver with Node,RBAC and NodeRestriction (internal/cluster): what an
// operator sees with kubectl describe pod and kubectl events.

// kubeEvent is the part of a core/v1 Event the tests read.
type kubeEvent struct {
	Metadata       struct{ Name string }
	Type           string
	Reason         string
	Message        string
	Count          int
	FirstTimestamp string
	LastTimestamp  string
	InvolvedObject struct {
		APIVersion, Kind, Namespace, Name, UID, FieldPath string
	}
	Source             struct{ Component, Host string }
	ReportingComponent string
	ReportingInstance  string
}

// podEvents lists the Events on pod.
func podEvents(t *testing.T, pod string) []kubeEvent {
	t.Helper()
	out := kubectl(t, "get", "events", "--namespace", "default", "--field-selector", "involvedObject.name="+pod, "-o", "json")
	var list struct{ Items []kubeEvent }
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// eventsOf are those of evs about container (its fieldPath) from source.
func eventsOf(evs []kubeEvent, container, source string) []kubeEvent {
	var out []kubeEvent
	for _, e := range evs {
		if e.Source.Component == source && strings.HasSuffix(e.InvolvedObject.FieldPath, "{"+container+"}") {
			out = append(out, e)
		}
	}
	return out
}

// shimEvent waits for the shim's Event on pod about container, and checks
// that it is shaped as the kubelet's own: the pod with its uid, the
// container's fieldPath, source cri-nstarget on the node, count 1.
func shimEvent(t *testing.T, pod, container string) kubeEvent {
	t.Helper()
	return shimEventWith(t, pod, container, "")
}

// shimEventWith is shimEvent for the one Event with reason ("": any).
func shimEventWith(t *testing.T, pod, container, reason string) kubeEvent {
	t.Helper()
	return eventFrom(t, shim.LogPath(), pod, container, reason)
}

// eventFrom is shimEventWith for the cri-nstarget that logs to log.
func eventFrom(t *testing.T, log, pod, container, reason string) kubeEvent {
	t.Helper()
	var evs []kubeEvent
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		evs = eventsOf(podEvents(t, pod), container, "cri-nstarget")
		if reason != "" {
			evs = slices.DeleteFunc(evs, func(e kubeEvent) bool { return e.Reason != reason })
		}
		if len(evs) > 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(evs) != 1 {
		t.Fatalf("cri-nstarget's events on pod %s about %s (reason %q): %+v, want one\ncri-nstarget log tail:\n%s", pod, container, reason, evs, tail(log, 3000))
	}
	e, uid := evs[0], getPod(t, pod).Metadata.UID
	io := e.InvolvedObject
	if io.APIVersion != "v1" || io.Kind != "Pod" || io.Namespace != "default" || io.Name != pod || io.UID != uid ||
		io.FieldPath != "spec.ephemeralContainers{"+container+"}" || e.Source.Host != cluster.NodeName ||
		e.ReportingComponent != "cri-nstarget" || e.ReportingInstance != cluster.NodeName || e.Count != 1 ||
		e.FirstTimestamp == "" || e.FirstTimestamp != e.LastTimestamp {
		t.Errorf("event %+v; want it on pod %s (uid %s), fieldPath spec.ephemeralContainers{%s}, from cri-nstarget on %s, count 1, first = last timestamp",
			e, pod, uid, container, cluster.NodeName)
	}
	if len(e.Message) > 1024 || regexp.MustCompile(`[0-9a-f]{64}`).MatchString(e.Message) {
		t.Errorf("event message names an id, or is over 1 KiB: %q", e.Message)
	}
	return e
}

// operatorSees checks that kubectl describe pod lists e under Events, and
// that kubectl events --for pod/NAME lists it too.
func operatorSees(t *testing.T, pod string, e kubeEvent) {
	t.Helper()
	desc := describe(t, pod)
	_, events, _ := strings.Cut(desc, "\nEvents:")
	msg := strings.Join(strings.Fields(e.Message), " ")[:40]
	line := ""
	for _, l := range strings.Split(events, "\n") {
		if l = strings.Join(strings.Fields(l), " "); strings.Contains(l, e.Reason) && strings.Contains(l, msg) {
			line = l
		}
	}
	// describe prints: Type Reason Age From Message
	if !strings.HasPrefix(line, e.Type+" "+e.Reason+" ") || !strings.Contains(line, " "+e.Source.Component+" ") {
		t.Errorf("kubectl describe pod %s shows no %s %s from %s under Events:\n%s", pod, e.Type, e.Reason, e.Source.Component, events)
	}
	out := kubectl(t, "events", "--for", "pod/"+pod)
	if !strings.Contains(out, e.Reason) || !strings.Contains(strings.Join(strings.Fields(out), " "), msg) {
		t.Errorf("kubectl events --for pod/%s does not list %s:\n%s", pod, e.Reason, out)
	}
	if !t.Failed() {
		t.Logf("kubectl describe pod %s, under Events:\n  %s\nkubectl events --for pod/%s:\n%s", pod, line, pod, indent(out))
	}
}

func indent(s string) string {
	return "  " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n  ")
}

// dropped is cri_nstarget_events_total{result="dropped",reason=reason}.
func dropped(t *testing.T, reason string) float64 {
	t.Helper()
	v, ok := shimMetrics(t)[`cri_nstarget_events_total{mode="proxy",reason="`+reason+`",result="dropped"}`]
	if !ok {
		t.Fatalf("the shim's /metrics has no events_total series for reason %s", reason)
	}
	return v
}

// waitDropped waits until the drops for reason exceed before.
func waitDropped(t *testing.T, reason string, before float64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); dropped(t, reason) <= before; time.Sleep(250 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("no event dropped as %s (still %v)\ncri-nstarget log tail:\n%s", reason, before, tail(shim.LogPath(), 3000))
		}
	}
}

// When the shim cannot post its Event, the debug container is targeted as
// before, no event appears, and the metric counts the drop by reason: no
// kubeconfig, an apiserver that is not there, an identity that may not.
func TestEventsFailures(t *testing.T) {
	app, appNS := startApp(t, podSpec{name: "quiet"})
	unreachable := filepath.Join(t.TempDir(), "unreachable.conf")
	b, err := os.ReadFile(cluster.KubeletKubeconfig(kube.Dir()))
	if err != nil {
		t.Fatal(err)
	}
	closed := "https://127.0.0.1:" + cluster.FreePort() // nothing listens there
	if err := os.WriteFile(unreachable, []byte(strings.Replace(string(b), kube.Server(), closed, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	nobody, err := kube.UserKubeconfig("nobody", "cri-nstarget-nobody")
	if err != nil {
		t.Fatal(err)
	}
	for i, tc := range []struct{ name, kubeconfig, reason string }{
		{"no kubeconfig", filepath.Join(t.TempDir(), "kubelet.conf"), "no_kubeconfig"},
		{"apiserver unreachable", unreachable, "unreachable"},
		{"identity without permission", nobody, "forbidden"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			restartShim(t, "--events-kubeconfig", tc.kubeconfig)
			t.Cleanup(func() { restartShim(t) })
			before := dropped(t, tc.reason)
			name := "dbg-quiet-" + strconv.Itoa(i)
			dbg, out := debug(t, "quiet", name, busyboxImage, "--target=app")
			checkTargeted(t, app, dbg, appNS, out)
			waitDropped(t, tc.reason, before)
			if evs := eventsOf(podEvents(t, "quiet"), name, "cri-nstarget"); len(evs) > 0 {
				t.Errorf("an event about %s with %s: %+v", name, tc.name, evs)
			}
		})
	}
}

// The least-privilege alternative of docs/operations.md: an identity of its
// own, bound to the ClusterRole there (applied as the doc writes it), posts
// the same Event.
func TestEventsLeastPrivilege(t *testing.T) {
	rbac := docBlock(t, "../docs/operations.md", "events-rbac")
	if err := kube.Apply(ctx(t), rbac); err != nil {
		t.Fatalf("apply the RBAC of docs/operations.md: %v\n%s", err, rbac)
	}
	t.Cleanup(func() {
		kube.Kubectl(ctx(t), "delete", "clusterrolebinding,clusterrole", "cri-nstarget-events", "--ignore-not-found")
	})
	kc, err := kube.UserKubeconfig("events", "cri-nstarget-events")
	if err != nil {
		t.Fatal(err)
	}
	restartShim(t, "--events-kubeconfig", kc)
	t.Cleanup(func() { restartShim(t) })
	app, appNS := startApp(t, podSpec{name: "least"})
	dbg, out := debug(t, "least", "dbg-least", busyboxImage, "--target=app")
	checkTargeted(t, app, dbg, appNS, out)
	var evs []kubeEvent
	for deadline := time.Now().Add(30 * time.Second); len(evs) == 0 && time.Now().Before(deadline); time.Sleep(250 * time.Millisecond) {
		evs = eventsOf(podEvents(t, "least"), "dbg-least", "cri-nstarget")
	}
	if len(evs) != 1 || evs[0].Type != "Normal" || evs[0].Reason != "Targeted" {
		t.Errorf("events from the dedicated identity: %+v; want one Normal Targeted", evs)
	}
}

// docBlock is the fenced block of doc that follows the HTML comment
// <!-- name -->.
func docBlock(t *testing.T, doc, name string) string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)<!-- " + regexp.QuoteMeta(name) + " -->\n```[a-z]*\n(.*?)```").FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s has no block marked <!-- %s -->", doc, name)
	}
	return string(m[1])
}

// A CRI client that is not the kubelet (crictl, critest) names a pod that
// exists in no apiserver, or not with that uid: the shim's Event is
// dropped and counted (pod_not_found), nothing is posted, and the log says
// so once, not once per event.
func TestEventsPodNotInTheAPIServer(t *testing.T) {
	app, _ := startApp(t, podSpec{name: "crictl"})
	p := getPod(t, "crictl")
	before := dropped(t, "pod_not_found")
	for i, md := range []*runtimeapi.PodSandboxMetadata{
		{Name: "made-by-crictl", Uid: "3f1e", Namespace: "default"},
		{Name: "crictl", Uid: "not-" + p.Metadata.UID, Namespace: "default"}, // the name, another pod's uid
	} {
		name := "crictl-dbg-" + strconv.Itoa(i)
		resp, err := shim.Runtime.CreateContainer(ctx(t), &runtimeapi.CreateContainerRequest{
			PodSandboxId:  sandboxOf(t, app.id()),
			SandboxConfig: &runtimeapi.PodSandboxConfig{Metadata: md},
			Config: &runtimeapi.ContainerConfig{
				Metadata: &runtimeapi.ContainerMetadata{Name: name},
				Image:    &runtimeapi.ImageSpec{Image: busyboxImage},
				Command:  []string{"sleep", "60"},
				Linux: &runtimeapi.LinuxContainerConfig{SecurityContext: &runtimeapi.LinuxContainerSecurityContext{
					NamespaceOptions: &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: app.id()}}},
			},
		})
		if err != nil {
			t.Fatalf("CreateContainer %s through the shim: %v", name, err)
		}
		t.Cleanup(func() {
			shim.Runtime.RemoveContainer(ctx(t), &runtimeapi.RemoveContainerRequest{ContainerId: resp.GetContainerId()})
		})
		// its Event is due once the check after its start has seen it
		if _, err := shim.Runtime.StartContainer(ctx(t), &runtimeapi.StartContainerRequest{ContainerId: resp.GetContainerId()}); err != nil {
			t.Fatalf("StartContainer %s through the shim: %v", name, err)
		}
		waitDropped(t, "pod_not_found", before+float64(i))
	}
	if evs := podEvents(t, "made-by-crictl"); len(evs) > 0 {
		t.Errorf("events on a pod no apiserver holds: %+v", evs)
	}
	if evs := eventsOf(podEvents(t, "crictl"), "crictl-dbg-1", "cri-nstarget"); len(evs) > 0 {
		t.Errorf("an event on pod crictl, whose uid the request did not give: %+v", evs)
	}
	log, _ := os.ReadFile(shim.LogPath())
	if n := strings.Count(string(log), "reason=pod_not_found"); n != 1 {
		t.Errorf("the shim's log has %d lines for pod_not_found drops; want 1 (one per reason and interval)", n)
	}
}

// sandboxOf is the pod sandbox of container id.
func sandboxOf(t *testing.T, id string) string {
	t.Helper()
	resp, err := direct.Runtime.ContainerStatus(ctx(t), &runtimeapi.ContainerStatusRequest{ContainerId: id})
	if err != nil {
		t.Fatal(err)
	}
	resp2, err := direct.Runtime.ListContainers(ctx(t), &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: resp.GetStatus().GetId()}})
	if err != nil || len(resp2.GetContainers()) != 1 {
		t.Fatalf("container %s: %v", id, err)
	}
	return resp2.GetContainers()[0].GetPodSandboxId()
}

var metricLineRE = regexp.MustCompile(`^(cri_nstarget_\S+) (\S+)$`)

// shimMetrics is every cri_nstarget series of the running shim, by its
// name and labels as exposed.
func shimMetrics(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, line := range strings.Split(scrape(t), "\n") {
		if m := metricLineRE.FindStringSubmatch(line); m != nil {
			v, _ := strconv.ParseFloat(m[2], 64)
			out[m[1]] = v
		}
	}
	return out
}
