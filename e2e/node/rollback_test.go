//go:build node

package node

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The cluster install's rollbacks after the kubelet's restart, with shims
// healthy by their health service but through which the node cannot work
// (internal/badshim): the installer rolls back by itself when the node is
// NotReady through the shim, and the host's guard does when no installer
// is left to do it.

// The installer's bounds (installer.Options, cmd/cri-nstarget-install's
// defaults) that the scenarios below tell apart.
const (
	// readyTimeout: the installer rolls back a node not Ready through the
	// shim this long after the kubelet's restart, whatever it reports.
	readyTimeout = 90 * time.Second
	// guardAfterNoCreate and readyTimeoutNoCreate are the nocreate
	// image's installer's (patchInstaller passes them; the defaults are
	// 120 s and 90 s): in clusterGuard no installer runs from its kill to
	// the guard, so the guard's bound (armed before the kubelet's restart,
	// it restores the kubelet this long after unless disarmed) need not
	// leave one the default ready timeout, only be more than its own (the
	// installer holds it to that); 75 s less waiting.
	guardAfterNoCreate   = 45 * time.Second
	readyTimeoutNoCreate = 30 * time.Second
	// guardService is the guard's transient service, which its timer
	// starts when it fires (installer.GuardService).
	guardService = "cri-nstarget-guard.service"
	// leasePrefix names the restart slots' Leases (deploy/: the default).
	leasePrefix = "cri-nstarget-install"
)

// installerStarted waits until the DaemonSet's pod of image tag runs its
// installer (mode install), and returns the container's id.
func (r *run) installerStarted(t *testing.T, tag string, timeout time.Duration) string {
	t.Helper()
	var id string
	r.poll(t, timeout, "the installer of "+tag+" running", func() (bool, string) {
		var list struct{ Items []installPod }
		if err := json.Unmarshal([]byte(r.kubectl(t, "-n", "cri-nstarget", "get", "pods", "-o", "json")), &list); err != nil {
			t.Fatal(err)
		}
		for _, p := range list.Items {
			if p.Metadata.DeletionTimestamp != nil || len(p.Spec.Containers) == 0 || !strings.HasSuffix(p.Spec.Containers[0].Image, ":"+tag) {
				continue
			}
			if len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil {
				id = p.Status.ContainerStatuses[0].id()
				return id != "", ""
			}
		}
		return false, fmt.Sprintf("%d pods", len(list.Items))
	})
	return id
}

// killAfterRestart starts a watcher in the guest that, once the installer's
// state says it restarted the kubelet, kills the installer's container id:
// every process in that container's cgroup, by its PID (kill -9). Its
// report is killed's.
func (r *run) killAfterRestart(t *testing.T, id string) {
	t.Helper()
	r.sh(t, time.Minute, `rm -f /run/nst-killer.log
nohup sh -c 'until grep -qF "\"phase\": \"kubelet-restarted\"" `+installState+` 2>/dev/null; do sleep 0.2; done
cg=$(find /sys/fs/cgroup/kubepods.slice -type d -name "cri-containerd-`+id+`.scope" | head -n 1)
pids=$(cat "$cg/cgroup.procs") && kill -9 $pids && echo "killed $pids ($cg) at $(date +%s.%N)"' >/run/nst-killer.log 2>&1 </dev/null &`)
}

// killed waits for the watcher of killAfterRestart to have killed, and
// returns its report.
func (r *run) killed(t *testing.T, timeout time.Duration) string {
	t.Helper()
	var report string
	r.poll(t, timeout, "the installer killed after the kubelet's restart", func() (bool, string) {
		report = r.sh(t, time.Minute, "cat /run/nst-killer.log")
		return strings.HasPrefix(report, "killed "), report
	})
	return report
}

// kubeletStarts are the times (the guest's clock) at which systemd started
// the kubelet since since.
func (r *run) kubeletStarts(t *testing.T, since time.Time) []time.Time {
	t.Helper()
	out := r.sh(t, time.Minute, fmt.Sprintf("journalctl -u kubelet -o short-unix --since=@%d | grep ' Started kubelet' || true", since.Unix()))
	var starts []time.Time
	for _, line := range strings.Split(out, "\n") {
		f, _, _ := strings.Cut(line, " ")
		if s, err := strconv.ParseFloat(f, 64); err == nil {
			starts = append(starts, time.Unix(0, int64(s*1e9)))
		}
	}
	return starts
}

// guardRuns is what the journal has of the guard's service since since:
// nothing unless its timer fired.
func (r *run) guardRuns(t *testing.T, since time.Time) string {
	t.Helper()
	return r.sh(t, time.Minute, fmt.Sprintf("journalctl -q -o short-unix -u %s --since=@%d || true", guardService, since.Unix()))
}

// endpointNow is the running kubelet's runtime endpoint, or "" while none
// runs (kubeletEndpoint, for polling through a restart).
func (r *run) endpointNow(t *testing.T) string {
	t.Helper()
	return r.sh(t, time.Minute, `pid=$(systemctl show -p MainPID --value kubelet)
{ tr '\0' '\n' </proc/$pid/cmdline | sed -n 's/^--container-runtime-endpoint=//p' | tail -n 1; } 2>/dev/null || true`)
}

// leasesFree checks that no node holds a restart slot.
func (r *run) leasesFree(t *testing.T) {
	t.Helper()
	out := r.kubectl(t, "-n", "cri-nstarget", "get", "leases", "-o",
		`jsonpath={range .items[*]}{.metadata.name}={.spec.holderIdentity}{"\n"}{end}`)
	for _, l := range strings.Fields(out) {
		name, holder, _ := strings.Cut(l, "=")
		if strings.HasPrefix(name, leasePrefix) && holder != "" {
			t.Errorf("the restart slot %s is held by %s", name, holder)
		}
	}
}

// clusterNotReady: an image whose shim is healthy by its health service
// but fails the CRI's Status and RunPodSandbox (internal/badshim notready):
// the installer restarts the kubelet onto it, the node reports NotReady
// through it, and the installer rolls back by itself well before its
// ReadyTimeout and the host's guard: the kubelet on containerd again with
// its file byte for byte, the node Ready, app's container the same, the
// slot free, the node labelled rolled-back with an Event, and the
// installer's pod Ready (the node is safe): the DaemonSet's rollout ends.
func (r *run) clusterNotReady(t *testing.T) {
	r.clusterSetup(t)
	flags := r.sh(t, time.Minute, "sha256sum "+kubeadmFlagsPath)
	start, guestStart := time.Now(), r.guestNow(t)
	r.applyCluster(t, "notready", false)
	pod := r.waitInstall(t, "notready", "install", "rolled-back", true, 5*time.Minute)
	t.Logf("rolled back %s after kubectl apply", since(start))
	r.logInstaller(t, pod)
	t.Logf("event: %s", r.nodeEvent(t, "RolledBack", "v0.0.0-node.notready"))
	starts := r.kubeletStarts(t, guestStart)
	if len(starts) != 2 {
		t.Fatalf("the kubelet started %d times since the apply (%v), want 2: onto the shim, and back", len(starts), starts)
	}
	// A rollback at the ReadyTimeout or by the guard comes later than this.
	back := starts[1].Sub(starts[0])
	t.Logf("the kubelet restarted onto the shim at %s, back onto containerd %s later", starts[0].Format(time.TimeOnly), back.Round(100*time.Millisecond))
	if back >= readyTimeout-10*time.Second {
		t.Errorf("the kubelet came back onto containerd %s after its restart onto the shim: not rolled back on NotReady, "+
			"but at the ReadyTimeout (%s) or later", back, readyTimeout)
	}
	if g := r.guardRuns(t, guestStart); g != "" {
		t.Errorf("the host's guard ran: the installer did not roll back in time:\n%s", g)
	}
	if ep := r.kubeletEndpoint(t); ep != containerdSocket {
		t.Errorf("the kubelet runs on %s", ep)
	}
	if now := r.sh(t, time.Minute, "sha256sum "+kubeadmFlagsPath); now != flags {
		t.Errorf("%s changed: %s, was %s", kubeadmFlagsPath, now, flags)
	}
	r.waitReadySince(t, starts[1], time.Minute)
	r.noShim(t)
	r.leasesFree(t)
	if state := r.sh(t, time.Minute, "cat "+installState); !strings.Contains(state, `"phase": "rolled-back"`) || !strings.Contains(state, "NotReady") {
		t.Errorf("%s (want rolled back for NotReady through the shim):\n%s", installState, state)
	}
	r.appUnchanged(t)
	// The node is safe, so its pod is Ready and the DaemonSet's rollout
	// ends, as `kubectl rollout status` says, with this node rolled back.
	t.Logf("rollout status: %s", strings.TrimSpace(r.kubectl(t, "-n", "cri-nstarget", "rollout", "status",
		"daemonset/cri-nstarget-install", "--timeout=60s")))
}

// clusterGuard: an image whose shim serves everything but CreateContainer
// (internal/badshim nocreate). Its installer is killed (by PID) right after
// it restarted the kubelet onto the shim; the kubelet, through the shim,
// cannot create its container again, so no installer runs: the host's
// guard, armed before the restart, puts the kubelet back on containerd
// within guardAfterNoCreate, with its file byte for byte, the node Ready and app's
// container the same. Then the installer, started again through
// containerd, finishes the rollback.
func (r *run) clusterGuard(t *testing.T) {
	r.clusterSetup(t)
	flags := r.sh(t, time.Minute, "sha256sum "+kubeadmFlagsPath)
	start, guestStart := time.Now(), r.guestNow(t)
	r.applyCluster(t, "nocreate", false)
	id := r.installerStarted(t, "nocreate", 5*time.Minute)
	r.killAfterRestart(t, id)
	report := r.killed(t, 3*time.Minute)
	t.Logf("%s after kubectl apply, %s", since(start), report)
	r.poll(t, guardAfterNoCreate+90*time.Second, "the kubelet back on containerd's endpoint", func() (bool, string) {
		ep := r.endpointNow(t)
		return ep == containerdSocket, ep
	})
	t.Logf("the kubelet is back on containerd %s after kubectl apply; the installer's pod: %s", since(start),
		r.kubectl(t, "-n", "cri-nstarget", "get", "pods", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.containerStatuses[0].restartCount} {.status.containerStatuses[0].state}{"\n"}{end}`))
	starts := r.kubeletStarts(t, guestStart)
	if len(starts) < 2 {
		t.Fatalf("the kubelet started %d times since the apply (%v), want 2 at least", len(starts), starts)
	}
	back := starts[1].Sub(starts[0])
	t.Logf("the kubelet restarted onto the shim at %s, back onto containerd %s later", starts[0].Format(time.TimeOnly), back.Round(100*time.Millisecond))
	if back > guardAfterNoCreate+30*time.Second {
		t.Errorf("the kubelet came back %s after its restart onto the shim, later than the guard's %s", back, guardAfterNoCreate)
	}
	g := r.guardRuns(t, guestStart)
	t.Logf("%s's journal:\n%s", guardService, g)
	if g == "" {
		t.Errorf("%s never ran: who restored the kubelet?", guardService)
	}
	// No installer ran between the kill and the restore: the next one's
	// log starts after the kubelet was back on containerd.
	pod := r.waitInstall(t, "nocreate", "install", "rolled-back", true, 5*time.Minute)
	if first := r.sh(t, time.Minute, fmt.Sprintf("head -n 1 /var/log/pods/cri-nstarget_%s_*/install/1.log | cut -d' ' -f1", pod.Metadata.Name)); first != "" {
		if at, err := time.Parse(time.RFC3339Nano, first); err != nil || at.Before(starts[1]) {
			t.Errorf("the installer's next container logged at %s (%v), before the kubelet came back at %s", first, err, starts[1])
		}
	}
	t.Logf("rolled back %s after kubectl apply; event: %s", since(start), r.nodeEvent(t, "RolledBack", "v0.0.0-node.nocreate"))
	r.logInstaller(t, pod)
	if state := r.sh(t, time.Minute, "cat "+installState); !strings.Contains(state, `"phase": "rolled-back"`) || !strings.Contains(state, "guard") {
		t.Errorf("%s (want rolled back after the host's guard):\n%s", installState, state)
	}
	if ep := r.kubeletEndpoint(t); ep != containerdSocket {
		t.Errorf("the kubelet runs on %s", ep)
	}
	if now := r.sh(t, time.Minute, "sha256sum "+kubeadmFlagsPath); now != flags {
		t.Errorf("%s changed: %s, was %s", kubeadmFlagsPath, now, flags)
	}
	r.waitReadySince(t, starts[len(starts)-1], time.Minute)
	r.noShim(t)
	r.leasesFree(t)
	r.appUnchanged(t)
}
