//go:build node

package node

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// The cluster install (deploy/, docs/cluster-install.md) on a node whose
// kubelet starts on containerd directly: the DaemonSet with an image whose
// shim is never healthy (rolled back, the kubelet never restarted; the full
// run only), with shims healthy but useless after the kubelet's restart
// (rollback_test.go: rolled back by the installer, and by the host's
// guard), then with a good one, its installer killed right after it
// restarted the kubelet (the next one finishes), an upgrade (the shim
// restarts, the kubelet does not), and the cleanup. The pod app, started
// before, runs through all of it with the same container and restart count.

// installImage is the images' repository in the host's registry.
const installImage = "nst/cri-nstarget"

// The node's files the cluster install may touch, and what it keeps.
const (
	kubeadmFlagsPath = "/var/lib/kubelet/kubeadm-flags.env"
	installState     = "/var/lib/cri-nstarget-install/state.json"
	shimEndpoint     = "unix:///run/cri-nstarget/cri.sock"
	containerdSocket = "unix:///run/containerd/containerd.sock"
)

// shimFiles are every path of the shim's that the cluster install makes;
// none may be left after its cleanup (or a rollback, but the state).
var shimFiles = []string{"/usr/local/bin/cri-nstarget", "/etc/systemd/system/cri-nstarget.service", "/etc/cri-nstarget",
	"/run/cri-nstarget", "/etc/systemd/system/multi-user.target.wants/cri-nstarget.service",
	"/etc/systemd/system/containerd.service.wants/cri-nstarget.service"}

// loadImage reads the amd64 image of an OCI layout (a directory, or a tar
// of one) into the harness's registry's form.
func loadImage(p string) (*harness.Image, error) {
	blobs := map[string][]byte{}
	fi, err := os.Stat(p)
	if err != nil {
		return nil, err
	}
	if fi.IsDir() {
		err = filepath.WalkDir(p, func(f string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(p, f)
			blobs[rel], err = os.ReadFile(f)
			return err
		})
	} else {
		var b []byte
		if b, err = os.ReadFile(p); err == nil {
			tr := tar.NewReader(bytes.NewReader(b))
			for {
				h, terr := tr.Next()
				if terr == io.EOF {
					break
				}
				if terr != nil {
					return nil, terr
				}
				if h.Typeflag == tar.TypeReg {
					if blobs[strings.TrimPrefix(h.Name, "./")], err = io.ReadAll(tr); err != nil {
						return nil, err
					}
				}
			}
		}
	}
	if err != nil {
		return nil, err
	}
	blob := func(d digest.Digest) []byte { return blobs["blobs/"+d.Algorithm().String()+"/"+d.Encoded()] }
	var idx ocispec.Index
	if err := json.Unmarshal(blobs["index.json"], &idx); err != nil {
		return nil, fmt.Errorf("%s: index.json: %w", p, err)
	}
	// index.json names the image index, which lists an image per platform.
	for len(idx.Manifests) > 0 && idx.Manifests[0].MediaType == ocispec.MediaTypeImageIndex {
		var inner ocispec.Index
		if err := json.Unmarshal(blob(idx.Manifests[0].Digest), &inner); err != nil {
			return nil, err
		}
		idx = inner
	}
	for _, m := range idx.Manifests {
		if m.Platform == nil || m.Platform.Architecture != "amd64" {
			continue
		}
		raw := blob(m.Digest)
		var man ocispec.Manifest
		if err := json.Unmarshal(raw, &man); err != nil {
			return nil, err
		}
		img := &harness.Image{Manifest: raw, ManifestDigest: m.Digest, Config: blob(man.Config.Digest), ConfigDigest: man.Config.Digest,
			Layers: map[digest.Digest][]byte{}}
		for _, l := range man.Layers {
			img.Layers[l.Digest] = blob(l.Digest)
		}
		return img, nil
	}
	return nil, fmt.Errorf("%s: no linux/amd64 image", p)
}

// applyCluster applies the cluster install (deploy/, or deploy/cleanup/)
// with the image of tag, as docs/cluster-install.md says: a copy of
// deploy/ with the image's two lines set.
func (r *run) applyCluster(t *testing.T, tag string, cleanup bool) {
	t.Helper()
	dir := filepath.Join(r.kube.Dir(), "deploy")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(dir, os.DirFS("../../deploy")); err != nil {
		t.Fatal(err)
	}
	k := filepath.Join(dir, "install", "kustomization.yaml")
	b, err := os.ReadFile(k)
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Replace(string(b), "newName: registry.example.com/cri-nstarget", "newName: "+r.registry+"/"+installImage, 1)
	s = strings.Replace(s, "newTag: v0.0.0", "newTag: "+tag, 1)
	if s == string(b) {
		t.Fatalf("%s: the image's lines are not there to set", k)
	}
	if err := os.WriteFile(k, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	if cleanup {
		dir = filepath.Join(dir, "cleanup")
	} else {
		r.patchInstaller(t, dir, tag)
	}
	t.Logf("kubectl apply -k: %s", strings.TrimSpace(r.kubectl(t, "apply", "-k", dir)))
}

// patchInstaller adds to the installer's container, through a patch in
// deploy/kustomization.yaml (which has none): NSTARGET_NODE_INSTALL_ARGS's
// arguments; for the nocreate image, the guard's shorter bounds
// (guardAfterNoCreate). (The smoke test runs the installer's own image, found by its
// pod's uid, which deploy/ passes as $POD_UID.)
func (r *run) patchInstaller(t *testing.T, dir, tag string) {
	t.Helper()
	var ops []string
	args := strings.Fields(installArgs)
	if tag == "nocreate" {
		args = append(args, "--guard-after="+guardAfterNoCreate.String(), "--ready-timeout="+readyTimeoutNoCreate.String())
	}
	for _, a := range args {
		ops = append(ops, fmt.Sprintf("{op: add, path: /spec/template/spec/containers/0/args/-, value: %q}", a))
	}
	if len(args) > 0 {
		t.Logf("the installer gets the arguments %q too (NSTARGET_NODE_INSTALL_ARGS, and the nocreate image's bounds)", args)
	}
	if len(ops) == 0 {
		return
	}
	patch := "patches:\n- target:\n    kind: DaemonSet\n    name: cri-nstarget-install\n  patch: |-\n"
	for _, op := range ops {
		patch += "    - " + op + "\n"
	}
	k := filepath.Join(dir, "kustomization.yaml")
	b, err := os.ReadFile(k)
	if err == nil {
		err = os.WriteFile(k, append(b, patch...), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// installPod is the DaemonSet's pod, as the test waits on it.
type installPod struct {
	Metadata struct {
		Name              string
		DeletionTimestamp *string
	}
	Spec struct {
		Containers []struct {
			Image string
			Args  []string
		}
	}
	Status struct {
		Conditions        []struct{ Type, Status string }
		ContainerStatuses []containerStatus
	}
}

func (p installPod) ready() bool {
	for _, c := range p.Status.Conditions {
		if c.Type == "Ready" {
			return c.Status == "True"
		}
	}
	return false
}

// waitInstall waits until the node's state label is state and the
// DaemonSet's one pod (of image tag, in mode install or cleanup) is Ready
// or, for a failure, Running and not Ready; and returns that pod.
func (r *run) waitInstall(t *testing.T, tag, mode, state string, ready bool, timeout time.Duration) installPod {
	t.Helper()
	defer r.dumpOnFailure(t)
	var pod installPod
	r.poll(t, timeout, fmt.Sprintf("node label %q and the installer (%s, %s) ready=%v", state, tag, mode, ready), func() (bool, string) {
		label := r.kubectl(t, "get", "node", nodeName, "-o", `jsonpath={.metadata.labels.cri-nstarget\.io/state}`)
		var list struct{ Items []installPod }
		if err := json.Unmarshal([]byte(r.kubectl(t, "-n", "cri-nstarget", "get", "pods", "-o", "json")), &list); err != nil {
			t.Fatal(err)
		}
		var seen []string
		for _, p := range list.Items {
			if p.Metadata.DeletionTimestamp != nil || len(p.Spec.Containers) == 0 {
				continue
			}
			c := p.Spec.Containers[0]
			seen = append(seen, fmt.Sprintf("%s %s %v ready=%v", p.Metadata.Name, c.Image, c.Args, p.ready()))
			if strings.HasSuffix(c.Image, ":"+tag) && len(c.Args) > 0 && c.Args[0] == mode && label == state && p.ready() == ready &&
				len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil {
				pod = p
				return true, ""
			}
		}
		return false, fmt.Sprintf("label %q, pods %v", label, seen)
	})
	return pod
}

// dumpOnFailure logs, once t failed, what the node says of the cluster
// install: the installers' logs, the state, the Node's annotation. It runs
// in a deferred call after t.Fatal: nothing here fails the test again.
func (r *run) dumpOnFailure(t *testing.T) {
	if !t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := r.vm.Run(ctx, `for f in /var/log/pods/cri-nstarget_*/install/*.log; do echo "== $f"; tail -n 40 "$f" | cut -d' ' -f4-; done
echo "== `+installState+`"; cat `+installState+` 2>&1`)
	t.Logf("the installers' logs on the node (%v):\n%s%s", err, res.Stdout, res.Stderr)
	if out, err := r.kube.Kubectl(ctx, "get", "node", nodeName, "-o", `jsonpath={.metadata.labels}{"\n"}{.metadata.annotations}`); err == nil {
		t.Logf("node %s: %s", nodeName, out)
	}
}

// installerLog is the log of the installer's container of attempt n in
// pod, read on the node (kubectl logs asks the kubelet, which the host
// cannot reach).
func (r *run) installerLog(t *testing.T, pod installPod, n int) string {
	t.Helper()
	return r.sh(t, time.Minute, fmt.Sprintf("cut -d' ' -f4- /var/log/pods/cri-nstarget_%s_*/install/%d.log", pod.Metadata.Name, n))
}

// logInstaller logs the installer's log, its current container's.
func (r *run) logInstaller(t *testing.T, pod installPod) {
	t.Helper()
	n := pod.Status.ContainerStatuses[0].RestartCount
	t.Logf("the installer's log (%s, container %d):\n%s", pod.Metadata.Name, n, r.installerLog(t, pod, n))
}

// nodeEvent waits for the installer's Event of reason on the node whose
// message contains about (e.g. a version: one node sees several rollbacks)
// and returns it.
func (r *run) nodeEvent(t *testing.T, reason, about string) string {
	t.Helper()
	var msg string
	r.poll(t, time.Minute, fmt.Sprintf("the Event %s about %q on node %s", reason, about, nodeName), func() (bool, string) {
		var list struct {
			Items []struct {
				Reason, Message, Type string
				InvolvedObject        struct{ Kind, Name string }
			}
		}
		out := r.kubectl(t, "-n", "default", "get", "events", "-o", "json", "--field-selector", "involvedObject.kind=Node,reason="+reason)
		if err := json.Unmarshal([]byte(out), &list); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.InvolvedObject.Name == nodeName && strings.Contains(e.Message, about) {
				msg = e.Type + " " + e.Reason + ": " + e.Message
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d such events", len(list.Items))
	})
	return msg
}

// unitPID is a unit's MainPID in the guest.
func (r *run) unitPID(t *testing.T, unit string) string {
	t.Helper()
	return r.sh(t, time.Minute, "systemctl show -p MainPID --value "+unit)
}

// kubeletEndpoint is the runtime endpoint on the running kubelet's command
// line (the last one, which it takes).
func (r *run) kubeletEndpoint(t *testing.T) string {
	t.Helper()
	return r.sh(t, time.Minute, `tr '\0' '\n' </proc/$(systemctl show -p MainPID --value kubelet)/cmdline | sed -n 's/^--container-runtime-endpoint=//p' | tail -n 1`)
}

// appUnchanged checks that pod app runs the container it ran before the
// cluster install's scenarios, never restarted.
func (r *run) appUnchanged(t *testing.T) {
	t.Helper()
	s, ok := r.pod(t, "app").status("app")
	if !ok || s.ContainerID != r.appBefore.ContainerID || s.RestartCount != r.appBefore.RestartCount || s.State.Running == nil {
		t.Errorf("pod app's container is %s (restarts %d, running %v), was %s (restarts %d)", s.ContainerID, s.RestartCount,
			s.State.Running != nil, r.appBefore.ContainerID, r.appBefore.RestartCount)
	}
}

// noShim checks that nothing of the shim is on the node: its files, its
// unit, its mounts.
func (r *run) noShim(t *testing.T) {
	t.Helper()
	left := r.sh(t, time.Minute, `for p in `+strings.Join(shimFiles, " ")+`; do test ! -e "$p" || echo "$p"; done
systemctl show -p LoadState --value cri-nstarget.service | grep -vx not-found || true
findmnt -rn -o TARGET | grep cri-nstarget || true`)
	if left != "" {
		t.Errorf("left of the shim on the node:\n%s", left)
	}
}

// clusterSetup starts pod app, which every cluster scenario checks is never
// restarted, and labels the node for the DaemonSet; once, in the first
// cluster scenario that runs.
func (r *run) clusterSetup(t *testing.T) {
	t.Helper()
	if r.appBefore.ContainerID != "" {
		return
	}
	r.kubectl(t, "apply", "-f", "-", podManifest("app", "Always", container{"app", r.busybox, "sleep 2147483"}))
	r.app = r.waitApp(t, "")
	r.appBefore, _ = r.pod(t, "app").status("app")
	r.kubectl(t, "label", "node", nodeName, "cri-nstarget.io/install=true")
}

// clusterBad: the DaemonSet with a shim that never becomes healthy. The
// installer rolls back by itself before the kubelet is touched: the node
// stays Ready on containerd, and says why; its pod is Ready (the node is
// safe), so a rollout goes on. (make node-e2e-full only: cluster-notready
// covers a rollback after the kubelet's restart, in make node-e2e.)
func (r *run) clusterBad(t *testing.T) {
	r.clusterSetup(t)
	kubelet := r.unitPID(t, "kubelet")
	flags := r.sh(t, time.Minute, "sha256sum "+kubeadmFlagsPath)

	start := time.Now()
	r.applyCluster(t, "bad", false)
	pod := r.waitInstall(t, "bad", "install", "rolled-back", true, 5*time.Minute)
	t.Logf("rolled back %s after kubectl apply", since(start))
	r.logInstaller(t, pod)
	t.Logf("event: %s", r.nodeEvent(t, "RolledBack", "v0.0.0-node.bad"))
	if now := r.unitPID(t, "kubelet"); now != kubelet {
		t.Errorf("the kubelet was restarted (pid %s, was %s)", now, kubelet)
	}
	if ep := r.kubeletEndpoint(t); ep != containerdSocket {
		t.Errorf("the kubelet runs on %s", ep)
	}
	if now := r.sh(t, time.Minute, "sha256sum "+kubeadmFlagsPath); now != flags {
		t.Errorf("%s changed: %s, was %s", kubeadmFlagsPath, now, flags)
	}
	r.waitReady(t, time.Minute)
	r.noShim(t)
	state := r.sh(t, time.Minute, "cat "+installState)
	if !strings.Contains(state, `"phase": "rolled-back"`) || !strings.Contains(state, "the shim did not start") {
		t.Errorf("%s:\n%s", installState, state)
	}
	detail := r.kubectl(t, "get", "node", nodeName, "-o", `jsonpath={.metadata.annotations.cri-nstarget\.io/state}`)
	t.Logf("node annotation cri-nstarget.io/state: %s", detail)
	r.appUnchanged(t)
}

// clusterInstall: the DaemonSet with a good image. A guest-side watcher
// kills the installer right after it asked systemd to restart the kubelet;
// its next container finds that in its state and finishes. Then the node
// is Ready through the shim, app runs on, and kubectl debug --target goes
// through the shim via NRI, with its Event.
func (r *run) clusterInstall(t *testing.T) {
	r.clusterSetup(t)
	kubelet := r.unitPID(t, "kubelet")
	start, guestStart := time.Now(), r.guestNow(t)
	r.applyCluster(t, "v1", false)
	r.killAfterRestart(t, r.installerStarted(t, "v1", 5*time.Minute))
	pod := r.waitInstall(t, "v1", "install", "installed", true, 10*time.Minute)
	t.Logf("installed %s after kubectl apply; killer: %s", since(start), r.killed(t, time.Minute))
	if n := pod.Status.ContainerStatuses[0].RestartCount; n != 1 {
		t.Errorf("the installer's container restarted %d times, want 1 (killed once)", n)
	}
	t.Logf("the killed installer's log:\n%s", r.installerLog(t, pod, 0))
	r.logInstaller(t, pod)
	if logs := r.installerLog(t, pod, 1); !strings.Contains(logs, "resuming: the kubelet was restarted") {
		t.Errorf("the second installer did not resume from the state")
	}
	t.Logf("event: %s", r.nodeEvent(t, "Installed", "v0.0.0-node.1"))
	if n := r.sh(t, time.Minute, fmt.Sprintf("journalctl -u kubelet -o cat --since=@%d | grep -c '^Started kubelet' || true", guestStart.Unix())); n != "1" {
		t.Errorf("the kubelet started %s times since the apply, want 1", n)
	}
	if now := r.unitPID(t, "kubelet"); now == kubelet {
		t.Errorf("the kubelet was not restarted")
	}
	if ep := r.kubeletEndpoint(t); ep != shimEndpoint {
		t.Errorf("the kubelet runs on %s, want the shim's", ep)
	}
	t.Logf("%s: %s", kubeadmFlagsPath, r.sh(t, time.Minute, "cat "+kubeadmFlagsPath))
	if cfg := r.sh(t, time.Minute, "cat /etc/cri-nstarget/config.toml"); !strings.Contains(cfg, "events_kubeconfig = '/etc/kubernetes/kubelet.conf'") {
		t.Errorf("the config the installer wrote:\n%s", cfg)
	}
	r.waitReady(t, time.Minute)
	r.appUnchanged(t)
	r.debug(t, true)
	r.checkEvent(t, fmt.Sprintf("dbg%d", r.debugs))
}

// clusterUpgrade: a new image rolls through: the shim restarts on the new
// binary, the kubelet does not.
func (r *run) clusterUpgrade(t *testing.T) {
	kubelet, shim := r.unitPID(t, "kubelet"), r.unitPID(t, "cri-nstarget")
	start := time.Now()
	r.applyCluster(t, "v2", false)
	pod := r.waitInstall(t, "v2", "install", "installed", true, 5*time.Minute)
	t.Logf("upgraded %s after kubectl apply; event: %s", since(start), r.nodeEvent(t, "Upgraded", ""))
	r.logInstaller(t, pod)
	if now := r.unitPID(t, "kubelet"); now != kubelet {
		t.Errorf("the kubelet was restarted (pid %s, was %s)", now, kubelet)
	}
	if now := r.unitPID(t, "cri-nstarget"); now == shim || now == "0" {
		t.Errorf("the shim's pid is %s, was %s: not restarted", now, shim)
	}
	if v := r.sh(t, time.Minute, "/usr/local/bin/cri-nstarget --version"); !strings.Contains(v, "v0.0.0-node.2") {
		t.Errorf("the shim is %s", v)
	}
	r.waitReady(t, time.Minute)
	r.appUnchanged(t)
}

// clusterCleanup: the cleanup mode puts the kubelet back on containerd,
// then takes the shim off: nothing of it is left, app runs on. Then the
// cluster install is deleted.
func (r *run) clusterCleanup(t *testing.T) {
	start, guestStart := time.Now(), r.guestNow(t)
	r.applyCluster(t, "v2", true)
	pod := r.waitInstall(t, "v2", "cleanup", "", true, 10*time.Minute)
	t.Logf("cleaned up %s after kubectl apply; event: %s", since(start), r.nodeEvent(t, "Removed", ""))
	r.logInstaller(t, pod)
	if ep := r.kubeletEndpoint(t); ep != containerdSocket {
		t.Errorf("the kubelet runs on %s, want containerd's", ep)
	}
	if got := r.sh(t, time.Minute, "cat "+kubeadmFlagsPath); got+"\n" != kubeadmFlags {
		t.Errorf("%s is\n%s\nwant it as it was:\n%s", kubeadmFlagsPath, got, kubeadmFlags)
	}
	r.noShim(t)
	if left := r.sh(t, time.Minute, "test ! -e /var/lib/cri-nstarget-install || ls -la /var/lib/cri-nstarget-install"); left != "" {
		t.Errorf("the installer's state is left:\n%s", left)
	}
	r.waitReadySince(t, guestStart, time.Minute)
	r.appUnchanged(t)

	// The cleanup's pods have nothing left to do: the namespace goes
	// while the package's steps run.
	r.kubectl(t, "delete", "-k", filepath.Join(r.kube.Dir(), "deploy", "cleanup"), "--wait=false", "--ignore-not-found")
	r.kubectl(t, "label", "node", nodeName, "cri-nstarget.io/install-")
}
