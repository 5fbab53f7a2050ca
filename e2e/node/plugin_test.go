//go:build node

package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// The plugin mode (deploy/plugin, issue 49) on the node before the cluster
// install, its kubelet on containerd's own socket: the DaemonSet applied as
// its kustomization says, kubectl debug --target through containerd's own
// CRI, pinned and verified by the plugin through NRI, with its Event; then
// kubectl delete -k. The kubelet keeps its pid and endpoint throughout, and
// nothing of the plugin is left on the host.

// The plugin's namespace, node label and state directory (deploy/plugin).
const (
	pluginNamespace = "cri-nstarget-plugin"
	pluginLabel     = "cri-nstarget.io/plugin"
	pluginStateDir  = "/run/cri-nstarget-plugin"
)

// pluginProcess finds the plugin's process in the guest (hostPID: its pid
// is the host's); the bracket keeps the guest's own shell out of it.
const pluginProcess = `pgrep -f -- '--mode=[p]lugin' || true`

// pluginMode is the step: apply, debug --target, delete, each checked.
func (r *run) pluginMode(t *testing.T) {
	r.clusterSetup(t)
	defer r.dumpPlugin(t)
	kubelet, endpoint := r.unitPID(t, "kubelet"), r.kubeletEndpoint(t)
	if endpoint != containerdSocket {
		t.Fatalf("the kubelet runs on %s before the plugin, want containerd's %s", endpoint, containerdSocket)
	}
	nsfs := r.nsfsMounts(t)
	r.podsReachAPIServer(t)

	start := time.Now()
	r.kubectl(t, "label", "node", nodeName, pluginLabel+"=true")
	dir := r.applyPlugin(t, "v1")
	pid := r.waitPlugin(t, 3*time.Minute)
	t.Logf("plugin Ready (pid %d) %s after kubectl apply -k", pid, since(start))
	r.kubeletUnchanged(t, kubelet, endpoint, "with the plugin Ready")

	id := r.debug(t, false)
	name := "dbg" + strconv.Itoa(r.debugs)
	r.checkPluginTargeted(t, name, id, pid)
	r.checkEvent(t, name)
	r.kubeletUnchanged(t, kubelet, endpoint, "after kubectl debug")

	// Not waiting on the API's objects (kubectl delete -k took 5.5 s in
	// one run, 27 s in another, on the namespace's deletion): the host is
	// what is checked, as it empties.
	start = time.Now()
	r.kubectl(t, "delete", "-k", dir, "--wait=false")
	r.kubectl(t, "label", "node", nodeName, pluginLabel+"-")
	r.pluginGone(t, nsfs)
	t.Logf("nothing of the plugin on the host %s after kubectl delete -k", since(start))
	r.kubeletUnchanged(t, kubelet, endpoint, "after kubectl delete -k")
	r.appUnchanged(t)
}

// podsReachAPIServer stands in for kube-proxy and the cluster's DNS for
// the pods on the pod network (base does it for the host's): the
// kubernetes Service's address goes to the apiserver on the host, and the
// plugin's kubeconfig names it kubernetes.default.svc (applyPlugin's
// hostAliases).
func (r *run) podsReachAPIServer(t *testing.T) {
	t.Helper()
	_, port, _ := strings.Cut(strings.TrimPrefix(r.kube.Server(), "https://"), ":")
	dnat := "PREROUTING -d 10.96.0.1/32 -p tcp --dport 443 -j DNAT --to-destination " + hostIP + ":" + port
	masq := "POSTROUTING -s 10.88.0.0/16 -d " + hostIP + "/32 -j MASQUERADE"
	r.sh(t, time.Minute, fmt.Sprintf("for rule in %q %q; do iptables -t nat -C $rule 2>/dev/null || iptables -t nat -A $rule; done", dnat, masq))
}

// applyPlugin applies a copy of deploy/plugin with the image of tag from
// the host's registry, as its kustomization says to, and the apiserver's
// Service name resolved (podsReachAPIServer). It returns the copy.
func (r *run) applyPlugin(t *testing.T, tag string) string {
	t.Helper()
	dir := filepath.Join(r.kube.Dir(), "plugin")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS("../../deploy/plugin")); err != nil {
		t.Fatal(err)
	}
	k := filepath.Join(dir, "kustomization.yaml")
	b, err := os.ReadFile(k)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "newName: registry.example.com/cri-nstarget", "newName: "+r.registry+"/"+installImage, 1)
	s = strings.Replace(s, "newTag: v0.0.0", "newTag: "+tag, 1)
	if strings.Count(s, r.registry) != 1 || !strings.Contains(s, "newTag: "+tag) {
		t.Fatalf("%s: the image's lines are not there to set", k)
	}
	s += `patches:
- target: {kind: DaemonSet, name: cri-nstarget-plugin}
  patch: |-
    - {op: add, path: /spec/template/spec/hostAliases, value: [{ip: 10.96.0.1, hostnames: [kubernetes.default.svc]}]}
`
	if err := os.WriteFile(k, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("kubectl apply -k: %s", strings.TrimSpace(r.kubectl(t, "apply", "-k", dir)))
	return dir
}

// waitPlugin waits until the plugin's one pod is Ready and returns its
// process's pid in the guest.
func (r *run) waitPlugin(t *testing.T, timeout time.Duration) int {
	t.Helper()
	r.poll(t, timeout, "the plugin's pod Ready", func() (bool, string) {
		out := r.kubectl(t, "-n", pluginNamespace, "get", "pods", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.phase} ready={.status.containerStatuses[0].ready} {.status.containerStatuses[0].state}{"\n"}{end}`)
		return strings.Count(out, "\n") == 1 && strings.Contains(out, " ready=true "), out
	})
	pids := strings.Fields(r.sh(t, time.Minute, pluginProcess))
	if len(pids) != 1 {
		t.Fatalf("the plugin's processes in the guest: %v, want one", pids)
	}
	pid, err := strconv.Atoi(pids[0])
	if err != nil {
		t.Fatal(err)
	}
	r.checkAppArmor(t, pid)
	return pid
}

// confined is what /proc/<pid>/attr/current reads for a process under
// containerd's default AppArmor profile, enforced.
const confined = "cri-containerd.apparmor.d (enforce)"

// checkAppArmor asserts that the node confines its containers with
// AppArmor, as a real Debian or Ubuntu node does (pod app's process runs
// under containerd's default profile), and that the plugin's process runs
// unconfined (daemonset.yaml's appArmorProfile): that profile denies
// mount(2), and each pin is one. A node without AppArmor fails here, so the
// proof does not vanish with it from the image (hack/node/image.sh).
func (r *run) checkAppArmor(t *testing.T, pluginPID int) {
	t.Helper()
	node := r.sh(t, time.Minute, `echo "enabled $(cat /sys/module/apparmor/parameters/enabled 2>/dev/null || echo absent),`+
		` parser $(test -x /sbin/apparmor_parser && echo present || echo absent)"`)
	app := r.sh(t, time.Minute, fmt.Sprintf("cat /proc/%d/attr/current", r.inspect(t, r.app.id).Info.Pid))
	if app != confined {
		t.Fatalf("AppArmor on the node: %s; pod app's process has profile %q, want %q: the node confines no container, "+
			"so the plugin's appArmorProfile proves nothing here (hack/node/image.sh installs apparmor)", node, app, confined)
	}
	plugin := r.sh(t, time.Minute, fmt.Sprintf("cat /proc/%d/attr/current", pluginPID))
	if plugin != "unconfined" {
		t.Errorf("the plugin's process has AppArmor profile %q, want unconfined (daemonset.yaml's appArmorProfile): "+
			"containerd's default profile denies the pins' mount(2)", plugin)
	}
	t.Logf("AppArmor (%s): pod app's process %s, the plugin's %s, %s", node, app, plugin, r.sh(t, time.Minute,
		fmt.Sprintf(`grep -E '^(CapEff|Seccomp):' /proc/%d/status | tr '\t\n' '  '`, pluginPID)))
}

// pluginPin matches a pin of the plugin's for container id: in its state
// directory, on the host's path or (its pins in its own mount namespace)
// through its root, /proc/<pid>/root. It returns that pid, 0 for none.
func pluginPin(path, id string) (int, bool) {
	m := regexp.MustCompile(`^(?:/proc/([1-9][0-9]*)/root)?` + regexp.QuoteMeta(pluginStateDir+"/pins/"+id+"/pid") + `$`).FindStringSubmatch(path)
	if m == nil {
		return 0, false
	}
	pid, _ := strconv.Atoi(m[1])
	return pid, true
}

// checkPluginTargeted asserts, in the node, that debug container id runs
// in app's PID namespace, and that the plugin did it: containerd received
// the kubelet's TARGET, the spec's path is the plugin's pin (not the
// target's /proc/<pid>/ns/pid that containerd writes), and the record says
// mode plugin via NRI, verified joined after the start.
func (r *run) checkPluginTargeted(t *testing.T, name, id string, pluginPID int) {
	t.Helper()
	in := r.inspect(t, id)
	if ns := r.sh(t, time.Minute, "readlink /proc/"+strconv.Itoa(in.Info.Pid)+"/ns/pid"); ns != r.app.ns {
		t.Errorf("%s's PID namespace is %s, app's %s", name, ns, r.app.ns)
	}
	if got := in.Info.Config.GetLinux().GetSecurityContext().GetNamespaceOptions().GetPid(); got != runtimeapi.NamespaceMode_TARGET {
		t.Errorf("containerd received pid mode %v for %s, want the kubelet's TARGET (no proxy between them)", got, name)
	}
	path, _ := oci.NamespacePath(in.Info.RuntimeSpec, specs.PIDNamespace)
	if pid, ok := pluginPin(path, id); !ok || (pid != 0 && pid != pluginPID) {
		t.Errorf("%s's spec pid namespace path = %q, want the plugin's pin %s/pins/%s/pid, or it through the plugin's root /proc/%d/root",
			name, path, pluginStateDir, id, pluginPID)
	}
	var rec oci.Record
	r.poll(t, 30*time.Second, name+"'s check after its start in its record", func() (bool, string) {
		var ok bool
		var err error
		rec, ok, err = oci.ParseRecord(r.inspect(t, id).Info.RuntimeSpec.Annotations)
		return err == nil && ok && rec.Namespaces["pid"].Verify != nil, fmt.Sprintf("%+v (found %v, %v)", rec, ok, err)
	})
	ns := rec.Namespaces["pid"]
	if rec.Mode != "plugin" || rec.Via != "nri" || rec.Target != r.app.id || ns.Result != oci.Targeted || ns.Path != path ||
		ns.Verify.Result != oci.Joined || "pid:["+strconv.FormatUint(ns.Verify.Inode, 10)+"]" != r.app.ns {
		t.Errorf("%s's record = %+v, verify %+v; want targeted at %.12s by the plugin mode via nri, verified joined in %s", name, rec, *ns.Verify, r.app.id, r.app.ns)
	}
	if !t.Failed() {
		t.Logf("%s: in app's %s; containerd received TARGET, spec → %s (containerd wrote %s); record mode %s via %s, verified %s",
			name, r.app.ns, path, ns.PodPath, rec.Mode, rec.Via, ns.Verify.Result)
	}
}

// kubeletUnchanged checks the kubelet's pid and runtime endpoint.
func (r *run) kubeletUnchanged(t *testing.T, pid, endpoint, when string) {
	t.Helper()
	if now := r.unitPID(t, "kubelet"); now != pid {
		t.Errorf("%s: the kubelet's pid is %s, was %s: restarted", when, now, pid)
	}
	if now := r.kubeletEndpoint(t); now != endpoint {
		t.Errorf("%s: the kubelet runs on %s, was on %s", when, now, endpoint)
	}
}

// nsfsMounts are the guest's nsfs mounts (a namespace pinned by a bind
// mount): each its mount point and namespace.
func (r *run) nsfsMounts(t *testing.T) []string {
	t.Helper()
	out := r.sh(t, time.Minute, `awk '{for (i = 7; i < NF; i++) if ($i == "-") { if ($(i+1) == "nsfs") print $5, $4; break }}' /proc/self/mountinfo`)
	return strings.FieldsFunc(out, func(c rune) bool { return c == '\n' })
}

// pluginGone waits until nothing of the plugin is on the host: no mount
// naming cri-nstarget, no nsfs mount that was not there before it
// (before), no state directory, no process.
func (r *run) pluginGone(t *testing.T, before []string) {
	t.Helper()
	r.poll(t, time.Minute, "host free of the plugin", func() (bool, string) {
		var left []string
		for _, m := range r.nsfsMounts(t) {
			if !slices.Contains(before, m) {
				left = append(left, "nsfs mount "+m)
			}
		}
		out := r.sh(t, time.Minute, `grep cri-nstarget /proc/self/mountinfo | sed 's/^/mount: /' || true
test ! -e `+pluginStateDir+` || echo "`+pluginStateDir+` is there: $(find `+pluginStateDir+` | head -n 5 | tr '\n' ' ')"
for p in $(`+pluginProcess+`); do echo "process $p: $(tr '\0' ' ' </proc/$p/cmdline)"; done`)
		if out != "" {
			left = append(left, out)
		}
		return len(left) == 0, strings.Join(left, "\n")
	})
}

// dumpPlugin logs, once t failed, what the node says of the plugin: its
// pods' Events, its log, and AppArmor's denials. It runs deferred after
// t.Fatal: nothing here fails the test again.
func (r *run) dumpPlugin(t *testing.T) {
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if out, err := r.kube.Kubectl(ctx, "-n", pluginNamespace, "get", "events", "-o",
		`jsonpath={range .items[*]}{.type} {.reason} {.involvedObject.name}: {.message}{"\n"}{end}`); err == nil {
		t.Logf("the plugin's namespace's Events:\n%s", out)
	}
	res, err := r.vm.Run(ctx, `for f in /var/log/pods/`+pluginNamespace+`_*/plugin/*.log; do echo "== $f"; tail -n 40 "$f" | cut -d' ' -f4-; done
echo "== AppArmor"; journalctl -k --no-pager -o cat | grep -i apparmor | tail -n 20`)
	t.Logf("the plugin's log on the node (%v):\n%s%s", err, res.Stdout, res.Stderr)
}
