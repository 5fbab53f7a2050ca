package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// observer reads what the containers printed and what containerd holds
// (its own CRI, not the shim's), and judges the debug containers.
type observer struct {
	direct     runtimeapi.RuntimeServiceClient
	watch      *watchdog
	kubeletLog string

	// printed: the PID namespace each container printed, by container id,
	// read as soon as the container is seen (a target instance may be
	// removed by the time a debug container that joined it is judged).
	// Owned by the observer's loop; mu for the judging.
	mu      sync.Mutex
	printed map[string]string
}

// firstLine is the first line a container wrote to stdout, from its CRI log
// file ("TIME STREAM TAG CONTENT" lines).
func firstLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		parts := strings.SplitN(s.Text(), " ", 4)
		if len(parts) == 4 && parts[1] == "stdout" {
			return strings.TrimSpace(parts[3])
		}
	}
	return ""
}

// collect reads the PID namespace of every container containerd holds that
// has printed it and is not yet known (debug containers' included).
func (o *observer) collect(ctx context.Context) {
	var resp *runtimeapi.ListContainersResponse
	err := o.watch.call(ctx, "ListContainers", func(ctx context.Context) (err error) {
		resp, err = o.direct.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
		return err
	})
	if err != nil {
		return
	}
	for _, c := range resp.GetContainers() {
		o.mu.Lock()
		_, known := o.printed[c.GetId()]
		o.mu.Unlock()
		if !known {
			o.printedBy(ctx, c.GetId())
		}
	}
}

// printedBy is the PID namespace container id printed, "" if not known.
func (o *observer) printedBy(ctx context.Context, id string) string {
	o.mu.Lock()
	ns, ok := o.printed[id]
	o.mu.Unlock()
	if ok {
		return ns
	}
	resp, err := o.status(ctx, id, false)
	if err != nil {
		return ""
	}
	if ns = firstLine(resp.GetStatus().GetLogPath()); strings.HasPrefix(ns, "pid:[") {
		o.mu.Lock()
		o.printed[id] = ns
		o.mu.Unlock()
		return ns
	}
	return ""
}

// targetExitSlack is how much later than the debug container containerd
// may record the exit of the target whose end killed it: the kernel kills
// the namespace's processes as its init exits, and each exit is reaped and
// timed by a shim of its own.
const targetExitSlack = time.Second

// endedFirst: container target had exited, in containerd's record, no
// later than container debug (within targetExitSlack).
func (o *observer) endedFirst(ctx context.Context, target, debug string) bool {
	var finished [2]int64
	for i, id := range []string{target, debug} {
		resp, err := o.status(ctx, id, false)
		if err != nil || resp.GetStatus().GetState() != runtimeapi.ContainerState_CONTAINER_EXITED {
			return false
		}
		finished[i] = resp.GetStatus().GetFinishedAt()
	}
	return finished[0] <= finished[1]+int64(targetExitSlack)
}

// status is containerd's ContainerStatus of container id, under the
// watchdog.
func (o *observer) status(ctx context.Context, id string, verbose bool) (resp *runtimeapi.ContainerStatusResponse, err error) {
	err = o.watch.call(ctx, "ContainerStatus", func(ctx context.Context) (err error) {
		resp, err = o.direct.ContainerStatus(ctx, &runtimeapi.ContainerStatusRequest{ContainerId: id, Verbose: verbose})
		return err
	})
	return resp, err
}

// recordOf is containerd's targeting record of container id, nil if none.
func (o *observer) recordOf(ctx context.Context, id string) (*oci.Record, string, error) {
	resp, err := o.status(ctx, id, true)
	if err != nil {
		return nil, "", err
	}
	var info struct {
		RuntimeSpec *specs.Spec `json:"runtimeSpec"`
	}
	if err := json.Unmarshal([]byte(resp.GetInfo()["info"]), &info); err != nil || info.RuntimeSpec == nil {
		return nil, resp.GetStatus().GetLogPath(), fmt.Errorf("containerd's verbose info of %.12s: %v", id, err)
	}
	r, ok, err := oci.ParseRecord(info.RuntimeSpec.Annotations)
	if err != nil || !ok {
		return nil, resp.GetStatus().GetLogPath(), err
	}
	return &r, resp.GetStatus().GetLogPath(), nil
}

// verdict is one debug container judged.
type verdict struct {
	req     *debugReq
	outcome Outcome
	why     string
	lost    bool // its pod went before it could be judged
}

// verifyGrace is how long after a debug container was asked for the shim's
// check after its start may still be on its way into its record.
const verifyGrace = 30 * time.Second

// stuckAfter: a debug container neither made nor refused this long after
// it was asked for counts as a hang.
const stuckAfter = 2 * time.Minute

// judge looks at a pending debug container in its pod's status (nil: the
// pod is gone or going) and returns a verdict, or nil while it is not over.
func (o *observer) judge(ctx context.Context, d *debugReq, pod *corev1.Pod) *verdict {
	var st *corev1.ContainerStatus
	if pod != nil {
		for i := range pod.Status.EphemeralContainerStatuses {
			if s := &pod.Status.EphemeralContainerStatuses[i]; s.Name == d.name {
				st = s
			}
		}
	}
	if st != nil && st.State.Waiting != nil && st.State.Waiting.Message != "" {
		d.lastErr, d.lastReason = st.State.Waiting.Message, st.State.Waiting.Reason
	}
	refused := func() *verdict {
		out, why := Judge(Observation{Error: d.lastErr, Code: kubeletCode(o.kubeletLog, d.lastErr)})
		return &verdict{req: d, outcome: out, why: d.lastReason + ": " + why}
	}
	switch {
	case st != nil && st.State.Terminated != nil && st.ContainerID != "":
		_, id, _ := strings.Cut(st.ContainerID, "://")
		obs := Observation{Made: true}
		if t := st.State.Terminated; t.ExitCode != 0 {
			obs.Error = fmt.Sprintf("exit %d %s: %s", t.ExitCode, t.Reason, t.Message)
			if c := kubeletCode(o.kubeletLog, t.Message); c != "" {
				obs.Error += " (" + c + ")"
			}
		}
		r, logPath, err := o.recordOf(ctx, id)
		if err != nil && r == nil && logPath == "" {
			switch {
			case status.Code(err) == codes.NotFound && (pod == nil || pod.DeletionTimestamp != nil):
				return &verdict{req: d, lost: true}
			case status.Code(err) != codes.NotFound && time.Since(d.asked) < stuckAfter:
				return nil // containerd is away (a fault): ask again
			}
			obs.Error += fmt.Sprintf(" (record: %v)", err)
		}
		obs.Record, obs.DebugNS = r, firstLine(logPath)
		if t := st.State.Terminated; t.ExitCode != 0 && obs.DebugNS == "" {
			// it never ran: the answer to its start says why
			if code := kubeletStartCode(o.kubeletLog, id); code != "" {
				out, why := Judge(Observation{Error: t.Reason + ": " + t.Message, Code: code})
				return &verdict{req: d, outcome: out, why: "start: " + why}
			}
		}
		if r != nil && r.Target != "" {
			obs.TargetNS = o.printedBy(ctx, r.Target)
			if obs.Killed = st.State.Terminated.ExitCode == 137; obs.Killed && obs.DebugNS == "" {
				obs.TargetEndedFirst = o.endedFirst(ctx, r.Target, id)
			}
		}
		if r != nil && r.Namespaces["pid"].Result == oci.Targeted && r.Namespaces["pid"].Verify == nil && time.Since(d.asked) < verifyGrace {
			return nil // the shim's check after the start is on its way: ask again
		}
		out, why := Judge(obs)
		return &verdict{req: d, outcome: out, why: why}
	case pod == nil || pod.DeletionTimestamp != nil:
		if d.lastErr != "" {
			return refused()
		}
		return &verdict{req: d, lost: true}
	case time.Since(d.asked) > stuckAfter:
		if d.lastErr != "" {
			return refused()
		}
		return &verdict{req: d, outcome: WrongJoin, why: fmt.Sprintf("neither made nor refused %s after it was asked for", stuckAfter)}
	}
	return nil
}
