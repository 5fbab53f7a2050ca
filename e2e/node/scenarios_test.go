//go:build node

package node

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// pinsDir is where the packaged config keeps the pins (state_dir).
const pinsDir = "/run/cri-nstarget/pins"

// app is the pod "app" and its container "app", which debug containers
// target.
type app struct {
	id, ns string // the container's id and its PID namespace, as the guest sees them
}

// debugTarget runs the pod app, then kubectl debug --target=app, and checks
// the debug container from inside the node.
func (r *run) debugTarget(t *testing.T) {
	start := time.Now()
	r.kubectl(t, "apply", "-f", "-", podManifest("app", "Always", container{"app", r.busybox, "sleep 2147483"}))
	r.app = r.waitApp(t, "")
	t.Logf("pod app running in %s (container %.12s, %s)", since(start), r.app.id, r.app.ns)
	r.debug(t, true)
	r.checkEvent(t, "dbg"+strconv.Itoa(r.debugs))
	t.Logf("systemd-analyze security cri-nstarget: %s", r.sh(t, time.Minute, "systemd-analyze security --no-pager cri-nstarget.service | tail -n 1"))
}

// checkEvent waits for the shim's Event on pod app about debug container
// name: the package's default config (events_kubeconfig, the kubelet's
// /etc/kubernetes/kubelet.conf) reached the apiserver as the node.
func (r *run) checkEvent(t *testing.T, name string) {
	t.Helper()
	var last string
	r.poll(t, time.Minute, "cri-nstarget's Targeted event about "+name+" on pod app", func() (bool, string) {
		var list struct {
			Items []struct {
				Type, Reason, Message string
				InvolvedObject        struct{ FieldPath string }
				Source                struct{ Component, Host string }
			}
		}
		if err := json.Unmarshal([]byte(r.kubectl(t, "get", "events", "--field-selector", "involvedObject.name=app", "-o", "json")), &list); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Source.Component == "cri-nstarget" && e.InvolvedObject.FieldPath == "spec.ephemeralContainers{"+name+"}" {
				last = fmt.Sprintf("%s %s from %s on %s: %s", e.Type, e.Reason, e.Source.Component, e.Source.Host, e.Message)
				return e.Type == "Normal" && e.Reason == "Targeted" && e.Source.Host == nodeName, last
			}
		}
		return false, fmt.Sprintf("%d events on pod app, none from cri-nstarget about %s", len(list.Items), name)
	})
	t.Logf("event: %s", last)
}

// waitApp waits until the container app of pod app runs, as a container
// other than notID, and returns it.
func (r *run) waitApp(t *testing.T, notID string) app {
	t.Helper()
	var id string
	r.poll(t, 5*time.Minute, "pod app's container app running (not "+short(notID)+")", func() (bool, string) {
		p := r.pod(t, "app")
		s, ok := p.status("app")
		id = s.id()
		return ok && s.State.Running != nil && id != "" && id != notID, fmt.Sprintf("%+v", p.Status.ContainerStatuses)
	})
	pid := r.sh(t, time.Minute, "crictl inspect -o go-template --template '{{.info.pid}}' "+id)
	return app{id: id, ns: r.sh(t, time.Minute, "readlink /proc/"+pid+"/ns/pid")}
}

// debug runs kubectl debug --target=app on pod app (the general profile),
// waits until the debug container runs, and checks that it was targeted
// (want) or fell back. It returns its container id.
func (r *run) debug(t *testing.T, want bool) string {
	t.Helper()
	r.debugs++
	name := "dbg" + strconv.Itoa(r.debugs)
	start := time.Now()
	r.kubectl(t, "debug", "app", "-c", name, "--image="+r.busybox, "--target=app", "--profile=general", "--", "sleep", "2147483")
	id := r.waitEphemeral(t, "app", name)
	t.Logf("kubectl debug --target=app: %s running in %s", name, since(start))
	if want {
		r.checkTargeted(t, name, id)
	}
	return id
}

func (r *run) waitEphemeral(t *testing.T, pod, name string) string {
	t.Helper()
	var id string
	r.poll(t, 3*time.Minute, name+" running", func() (bool, string) {
		p := r.pod(t, pod)
		s, ok := p.ephemeral(name)
		id = s.id()
		return ok && s.State.Running != nil && id != "", fmt.Sprintf("%+v", p.Status.EphemeralContainerStatuses)
	})
	return id
}

// inspect is what the node's containerd says of a container (crictl
// inspect, verbose): the CreateContainer request it received and the spec
// it runs.
type inspect struct {
	Info struct {
		Pid         int                         `json:"pid"`
		Config      *runtimeapi.ContainerConfig `json:"config"`
		RuntimeSpec *specs.Spec                 `json:"runtimeSpec"`
	} `json:"info"`
}

func (r *run) inspect(t *testing.T, id string) inspect {
	t.Helper()
	var in inspect
	out := r.sh(t, time.Minute, "crictl inspect "+id)
	if err := json.Unmarshal([]byte(out), &in); err != nil || in.Info.RuntimeSpec == nil || in.Info.Pid == 0 {
		t.Fatalf("crictl inspect %s: %v\n%.2000s", id, err, out)
	}
	return in
}

// checkTargeted asserts, in the node, that the debug container id runs in
// app's PID namespace, and that the shim did it on its expected path:
// containerd received POD, the spec's path is the shim's pin, and the
// record says so. runc joined that pin, so the unit's hardening leaves the
// pins visible to runc.
func (r *run) checkTargeted(t *testing.T, name, id string) {
	t.Helper()
	in := r.inspect(t, id)
	if ns := r.sh(t, time.Minute, "readlink /proc/"+strconv.Itoa(in.Info.Pid)+"/ns/pid"); ns != r.app.ns {
		t.Errorf("%s's PID namespace is %s, app's %s", name, ns, r.app.ns)
	}
	if got := in.Info.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(); got != runtimeapi.NamespaceMode_POD {
		t.Errorf("containerd received pid mode %v for %s, want POD: the shim must do the targeting", got, name)
	}
	path, _ := oci.NamespacePath(in.Info.RuntimeSpec, specs.PIDNamespace)
	if pin := pinsDir + "/" + id + "/pid"; path != pin {
		t.Errorf("%s's spec pid namespace path = %q, want the shim's pin %q", name, path, pin)
	}
	rec, ok, err := oci.ParseRecord(in.Info.RuntimeSpec.Annotations)
	if err != nil || !ok || rec.Target != r.app.id || rec.Via != r.b.via || rec.Namespaces["pid"].Result != oci.Targeted {
		t.Errorf("%s's record = %+v (ok %v, %v), want targeted at %.12s via %s", name, rec, ok, err, r.app.id, r.b.via)
	}
	if !t.Failed() {
		t.Logf("%s: in app's %s via %s; containerd received POD, spec → %s", name, r.app.ns, rec.Via, path)
	}
}

// restarts restarts the shim, kills it, and restarts containerd, under the
// live kubelet: each time the node stays Ready, app keeps running, and a new
// debug container is targeted on the backend's path (NRI again on 2.4).
func (r *run) restarts(t *testing.T) {
	for _, tc := range []struct{ name, script string }{
		{"systemctl restart cri-nstarget", "systemctl restart cri-nstarget"},
		{"kill -9 of the shim (Restart=always)", `old=$(systemctl show -p MainPID --value cri-nstarget)
kill -9 "$old"
for i in $(seq 60); do
  new=$(systemctl show -p MainPID --value cri-nstarget)
  if [ "$new" != 0 ] && [ "$new" != "$old" ] && systemctl -q is-active cri-nstarget; then exit 0; fi
  sleep 1
done
echo "cri-nstarget not back after kill -9" >&2; exit 1`},
		{"systemctl restart containerd", "systemctl restart containerd"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pid := r.mainPID(t)
			start := time.Now()
			r.sh(t, 3*time.Minute, tc.script)
			if now := r.mainPID(t); now == pid || now == "0" {
				t.Fatalf("the shim's MainPID is %s after %q, was %s", now, tc.name, pid)
			}
			r.waitCRI(t)
			r.waitReady(t, 3*time.Minute)
			if s := r.sh(t, time.Minute, "crictl inspect -o go-template --template '{{.status.state}}' "+r.app.id); s != "CONTAINER_RUNNING" {
				t.Errorf("app's container %.12s is %s after %s", r.app.id, s, tc.name)
			}
			r.debug(t, true)
			t.Logf("%s: back and targeting again in %s", tc.name, since(start))
		})
	}
}

// waitCRI waits until containerd and the shim both answer the CRI: a
// containerd 1.6 is active (READY=1) before its CRI plugin has initialized.
func (r *run) waitCRI(t *testing.T) {
	t.Helper()
	r.sh(t, 3*time.Minute, `for i in $(seq 120); do
  crictl info >/dev/null 2>&1 && crictl -r unix:///run/cri-nstarget/cri.sock info >/dev/null 2>&1 && exit 0
  sleep 1
done
crictl info >&2; exit 1`)
}

func (r *run) mainPID(t *testing.T) string {
	t.Helper()
	return r.sh(t, time.Minute, "systemctl show -p MainPID --value cri-nstarget")
}

// packageLife upgrades the package in place, removes it, purges it and
// installs it again, checking each against docs/operations.md.
func (r *run) packageLife(t *testing.T) {
	lastPin := pinsDir + "/" + r.lastDebug(t) + "/pid"
	newVersion := r.sh(t, time.Minute, "dpkg-deb -f /mnt/nst/cri-nstarget-new.deb Version")
	t.Run("upgrade while running", func(t *testing.T) {
		pid := r.mainPID(t)
		r.sh(t, 3*time.Minute, "dpkg -i /mnt/nst/cri-nstarget-new.deb >/dev/null")
		if v := r.sh(t, time.Minute, "dpkg-query -W -f '${Version}' cri-nstarget"); v != newVersion {
			t.Errorf("installed version %s, want %s", v, newVersion)
		}
		// operations.md: an upgrade restarts a running shim on the new
		// binary, and the pins survive.
		if now := r.mainPID(t); now == pid || now == "0" {
			t.Errorf("the shim's MainPID is %s after the upgrade, was %s: not restarted", now, pid)
		}
		r.sh(t, time.Minute, "systemctl -q is-active cri-nstarget && test -e "+lastPin+" && mountpoint -q "+lastPin)
		r.waitReady(t, 3*time.Minute)
		r.debug(t, true)
	})
	t.Run("remove", func(t *testing.T) {
		r.sh(t, 3*time.Minute, `dpkg -r cri-nstarget >/dev/null
! systemctl -q is-active cri-nstarget
test ! -e /usr/bin/cri-nstarget
test -e /etc/cri-nstarget/config.toml   # a conffile: kept until purge
test -e `+lastPin+`                     # the runtime directory is preserved`)
	})
	t.Run("purge", func(t *testing.T) {
		r.sh(t, 3*time.Minute, `dpkg -P cri-nstarget >/dev/null
test ! -e /etc/cri-nstarget/config.toml
test -z "$(find /etc/systemd/system -name 'cri-nstarget.service' 2>/dev/null)"   # enablement links gone`)
	})
	t.Run("reinstall", func(t *testing.T) {
		// A first install again: the unit is installed, neither enabled nor
		// started; the baker (here, the test) enables it.
		r.sh(t, 3*time.Minute, `dpkg -i /mnt/nst/cri-nstarget-new.deb >/dev/null
! systemctl -q is-active cri-nstarget
test "$(systemctl is-enabled cri-nstarget || true)" = disabled
systemctl enable --quiet --now cri-nstarget`)
		r.waitReady(t, 3*time.Minute)
		r.debug(t, true)
	})
}

// lastDebug is the id of the newest debug container of pod app.
func (r *run) lastDebug(t *testing.T) string {
	t.Helper()
	s, ok := r.pod(t, "app").ephemeral("dbg" + strconv.Itoa(r.debugs))
	if !ok || s.id() == "" {
		t.Fatalf("no debug container dbg%d", r.debugs)
	}
	return s.id()
}

// reboot reboots the guest on its disk: the units come up in order, the
// shim READY only once it serves, with no pin left in /run, the kubelet
// makes the pod's containers again, and a debug --target works.
func (r *run) reboot(t *testing.T) {
	oldApp := r.app.id
	bootID := r.sh(t, time.Minute, "cat /proc/sys/kernel/random/boot_id")
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, _ = r.vm.Run(ctx, "systemctl reboot") // the reply may never come
	cancel()
	r.poll(t, 5*time.Minute, "the guest up on a new boot", func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		res, err := r.vm.Run(ctx, "cat /proc/sys/kernel/random/boot_id")
		id := strings.TrimSpace(string(res.Stdout))
		return err == nil && id != "" && id != bootID, fmt.Sprint(id, err)
	})
	ctx, cancel = context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := r.vm.WaitRunning(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("rebooted: systemd running %s after the reboot", since(start))
	if pins := r.sh(t, time.Minute, "ls -A "+pinsDir+" 2>/dev/null || true"); pins != "" {
		t.Errorf("pins after the reboot, before any debug: %s", pins)
	}
	r.checkBootOrder(t)
	r.waitReady(t, 5*time.Minute)
	r.app = r.waitApp(t, oldApp)
	t.Logf("node Ready and app's container made again (%.12s) %s after the reboot", r.app.id, since(start))
	r.debug(t, true)
}

// checkBootOrder checks this boot's order, from systemd's own timestamps:
// containerd active before the shim starts, and the shim active before the
// kubelet starts. The shim is Type=notify, and READY=1 must mean it serves:
// the probe unit that ran as soon as the shim was active found its socket
// there (readyProbe). journald's receive time of the shim's
// "serving CRI" is printed too, but not compared: it may come after systemd
// handled READY=1, sent just after it.
func (r *run) checkBootOrder(t *testing.T) {
	t.Helper()
	ts := map[string]uint64{}
	for _, u := range []string{"containerd", "cri-nstarget", "kubelet"} {
		for _, p := range []string{"ExecMainStartTimestampMonotonic", "ActiveEnterTimestampMonotonic"} {
			v, err := strconv.ParseUint(r.sh(t, time.Minute, "systemctl show -p "+p+" --value "+u), 10, 64)
			if err != nil || v == 0 {
				t.Fatalf("%s %s: %d %v", u, p, v, err)
			}
			ts[u+"."+p] = v
		}
	}
	for _, c := range []struct {
		before, after string
		a, b          uint64
	}{
		{"containerd active", "cri-nstarget started", ts["containerd.ActiveEnterTimestampMonotonic"], ts["cri-nstarget.ExecMainStartTimestampMonotonic"]},
		{"cri-nstarget active (READY=1)", "kubelet started", ts["cri-nstarget.ActiveEnterTimestampMonotonic"], ts["kubelet.ExecMainStartTimestampMonotonic"]},
	} {
		if c.a > c.b {
			t.Errorf("boot order: %s at %d µs, not before %s at %d µs", c.before, c.a, c.after, c.b)
		}
	}
	probe := r.sh(t, time.Minute, "for i in $(seq 30); do test -e /run/nstarget-ready-probe && break; sleep 1; done; cat /run/nstarget-ready-probe 2>&1 || true")
	if probe != "serving" {
		t.Errorf("as soon as cri-nstarget.service was active, its socket was %q, want serving (nstarget-ready-probe.service)", probe)
	}
	var servedAt string
	if serving := r.journal(t, "-b", "MESSAGE=serving CRI"); len(serving) > 0 {
		servedAt = serving[0]["__MONOTONIC_TIMESTAMP"]
	}
	t.Logf("boot order (µs since boot): containerd active %d, cri-nstarget started %d, active %d (its \"serving CRI\" received by journald at %s), kubelet started %d",
		ts["containerd.ActiveEnterTimestampMonotonic"], ts["cri-nstarget.ExecMainStartTimestampMonotonic"],
		ts["cri-nstarget.ActiveEnterTimestampMonotonic"], servedAt, ts["kubelet.ExecMainStartTimestampMonotonic"])
}

// journal returns the shim's journal entries matching args (journalctl's
// matches and options), each as its fields.
func (r *run) journal(t *testing.T, args ...string) []map[string]string {
	t.Helper()
	out := r.sh(t, time.Minute, "journalctl --no-pager -o json -u cri-nstarget "+shellQuote(args))
	var entries []map[string]string
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var raw map[string]any
		if err := json.Unmarshal(sc.Bytes(), &raw); err != nil {
			t.Fatalf("journalctl -o json: %v: %s", err, sc.Text())
		}
		e := map[string]string{}
		for k, v := range raw {
			if s, ok := v.(string); ok {
				e[k] = s
			}
		}
		entries = append(entries, e)
	}
	return entries
}

func shellQuote(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

func short(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}

// logs checks the shim's journal entries: journald's own fields for a
// targeted create (priority info) and for a fallback (priority warning,
// found by journalctl -p warning), not lines of text at one priority.
func (r *run) logs(t *testing.T) {
	// The shim says which path it serves on, in a field of its own.
	serving := pick(r.journal(t, "-b", "VIA="+r.b.via), "serving CRI")
	checkFields(t, "the shim's \"serving CRI\" entry", serving, map[string]string{"PRIORITY": "6", "VIA": r.b.via})
	dbg := r.lastDebug(t)
	joined := pick(r.journal(t, "CONTAINER="+dbg), "container joins the target's namespace")
	want := map[string]string{"PRIORITY": "6", "SYSLOG_IDENTIFIER": "cri-nstarget", "TARGET": r.app.id, "VIA": r.b.via,
		"NAMESPACE": "pid", "PIN": pinsDir + "/" + dbg + "/pid"}
	checkFields(t, "the targeted create's entry", joined, want)

	// A fallback: the target has exited (restartPolicy Never).
	r.kubectl(t, "apply", "-f", "-", podManifest("oneshot", "Never",
		container{"app", r.busybox, "sleep 2147483"}, container{"done", r.busybox, "true"}))
	r.poll(t, 5*time.Minute, "oneshot's container done terminated", func() (bool, string) {
		p := r.pod(t, "oneshot")
		s, ok := p.status("done")
		return ok && s.State.Terminated != nil && s.id() != "", fmt.Sprintf("%+v", p.Status.ContainerStatuses)
	})
	r.kubectl(t, "debug", "oneshot", "-c", "fallback", "--image="+r.busybox, "--target=done", "--profile=general", "--", "sleep", "2147483")
	id := r.waitEphemeral(t, "oneshot", "fallback")
	fell := pick(r.journal(t, "-p", "warning", "CONTAINER="+id), "targeting fell back to the pod's namespace")
	checkFields(t, "the fallback's entry (journalctl -p warning)", fell, map[string]string{
		"PRIORITY": "4", "SYSLOG_IDENTIFIER": "cri-nstarget", "NAMESPACE": "pid", "REASON_KIND": "target_not_running",
	})
	if path, _ := oci.NamespacePath(r.inspect(t, id).Info.RuntimeSpec, specs.PIDNamespace); strings.HasPrefix(path, pinsDir) {
		t.Errorf("the fallback's pid namespace is a pin: %s", path)
	}
	r.kubectl(t, "delete", "pod", "oneshot", "--wait=false")
	t.Logf("journal: targeted %v; fallback %v", compact(joined), compact(fell))
}

// pick is the first entry with message, or nil.
func pick(entries []map[string]string, message string) map[string]string {
	for _, e := range entries {
		if e["MESSAGE"] == message {
			return e
		}
	}
	return nil
}

func checkFields(t *testing.T, what string, e, want map[string]string) {
	t.Helper()
	if e == nil {
		t.Errorf("%s: not in the journal", what)
		return
	}
	for k, v := range want {
		if e[k] != v {
			t.Errorf("%s: %s = %q, want %q (entry %v)", what, k, e[k], v, compact(e))
		}
	}
}

// compact is an entry without journald's own fields (those starting "_").
func compact(e map[string]string) map[string]string {
	c := map[string]string{}
	for k, v := range e {
		if !strings.HasPrefix(k, "_") && k != "__CURSOR" {
			c[k] = v
		}
	}
	return c
}
