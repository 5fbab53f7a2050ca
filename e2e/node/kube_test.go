//go:build node

package node

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// kubectl runs kubectl on the host against the control plane; the last
// argument is its standard input when the one before it is "-".
func (r *run) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdin string
	if n := len(args); n >= 2 && args[n-2] == "-" {
		args, stdin = args[:n-1], args[n-1]
	}
	cmd := r.kube.KubectlCommand(ctx, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// poll calls cond every second until it is true, or fails the test after
// timeout with what cond last said.
func (r *run) poll(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s; last: %s", what, timeout, last)
		}
		time.Sleep(time.Second)
	}
}

// waitReady waits until the node's Ready condition is True, as its kubelet
// last reported it.
func (r *run) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	r.poll(t, timeout, "node "+nodeName+" Ready", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := r.kube.Kubectl(ctx, "get", "node", nodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")]}`)
		var c struct{ Status, Reason, Message string }
		if err == nil {
			err = json.Unmarshal([]byte(out), &c)
		}
		return err == nil && c.Status == "True", fmt.Sprint(c, err)
	})
}

// guestNow is the guest's clock, which stamps the kubelet's statuses.
func (r *run) guestNow(t *testing.T) time.Time {
	t.Helper()
	s, err := strconv.ParseInt(r.sh(t, time.Minute, "date +%s"), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return time.Unix(s, 0)
}

// waitReadySince waits until the node is Ready in a status its kubelet
// reported after since (the guest's clock; the apiserver keeps seconds): a
// kubelet restarted at since has reported it.
func (r *run) waitReadySince(t *testing.T, since time.Time, timeout time.Duration) {
	t.Helper()
	r.poll(t, timeout, "node "+nodeName+" Ready, reported after "+since.Format(time.TimeOnly), func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		out, err := r.kube.Kubectl(ctx, "get", "node", nodeName, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")]}`)
		var c struct {
			Status, Reason, Message string
			LastHeartbeatTime       time.Time
		}
		if err == nil {
			err = json.Unmarshal([]byte(out), &c)
		}
		return err == nil && c.Status == "True" && c.LastHeartbeatTime.After(since.Truncate(time.Second)), fmt.Sprint(c, err)
	})
}

type container struct{ name, image, command string }

// podManifest is a pod on the node (no scheduler runs) with containers
// that run their command under sh.
func podManifest(name, restart string, cs ...container) string {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Pod
metadata: {name: %s, namespace: default}
spec:
  nodeName: %s
  restartPolicy: %s
  terminationGracePeriodSeconds: 1
  automountServiceAccountToken: false
  containers:
`, name, nodeName, restart)
	for _, c := range cs {
		fmt.Fprintf(&b, "  - {name: %s, image: %q, command: [sh, -c, %q]}\n", c.name, c.image, c.command)
	}
	return b.String()
}

type containerStatus struct {
	Name         string
	ContainerID  string
	RestartCount int
	State        struct {
		Running    *struct{}
		Terminated *struct{ ExitCode int }
	}
}

// id is the runtime's container id, without the "containerd://".
func (s containerStatus) id() string {
	_, id, _ := strings.Cut(s.ContainerID, "://")
	return id
}

type podStatus struct {
	Status struct {
		ContainerStatuses          []containerStatus
		EphemeralContainerStatuses []containerStatus
	}
}

func find(list []containerStatus, name string) (containerStatus, bool) {
	for _, s := range list {
		if s.Name == name {
			return s, true
		}
	}
	return containerStatus{}, false
}

func (p podStatus) status(name string) (containerStatus, bool) {
	return find(p.Status.ContainerStatuses, name)
}

func (p podStatus) ephemeral(name string) (containerStatus, bool) {
	return find(p.Status.EphemeralContainerStatuses, name)
}

func (r *run) pod(t *testing.T, name string) podStatus {
	t.Helper()
	var p podStatus
	if err := json.Unmarshal([]byte(r.kubectl(t, "get", "pod", name, "-o", "json")), &p); err != nil {
		t.Fatal(err)
	}
	return p
}
