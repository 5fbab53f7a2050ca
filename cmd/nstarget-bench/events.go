package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/cluster"
	"github.com/cri-nstarget/cri-nstarget/internal/harness"
)

// The events measure (`nstarget-bench events`, make bench-events): does a
// TARGET create wait on the apiserver? Three shims of the same binary in
// front of one containerd, the same pod and target: events off, events on
// (a real kube-apiserver, with a node's identity, the pod there so that
// every event is read and posted), and events to an apiserver that never
// answers (a listener that accepts and stays silent). Their CreateContainer
// with pid TARGET, and containerd's own, interleaved; then what each added
// against events off, pairwise, and what the shims' metrics say became of
// the events.

type eventsOptions struct {
	shimBin  string
	kubeBin  string
	etcd     string
	count    int
	keepLogs string
}

const (
	evDirect = iota // containerd's own TARGET
	evOff           // events_kubeconfig empty
	evOn            // the apiserver answers
	evSilent        // the apiserver never answers
	nEv
)

var evNames = [nEv]string{"containerd", "events off", "events on", "apiserver silent"}

func eventsCmd(ctx context.Context, args []string) error {
	fs := flag.NewFlagSet("events", flag.ExitOnError)
	var o eventsOptions
	fs.StringVar(&o.shimBin, "shim-binary", "bin/cri-nstarget", "cri-nstarget binary")
	fs.StringVar(&o.kubeBin, "kubernetes-bin", "", "directory with kube-apiserver and kubectl (hack/kubernetes.sh)")
	fs.StringVar(&o.etcd, "etcd", "", "etcd binary (hack/etcd.sh)")
	fs.IntVar(&o.count, "count", 60, "TARGET creates per side")
	fs.StringVar(&o.keepLogs, "logs", "", "copy the shims' logs here")
	fs.Parse(args)
	if os.Geteuid() != 0 {
		return errors.New("needs root (containerd, runc)")
	}
	if o.kubeBin == "" || o.etcd == "" {
		return errors.New("--kubernetes-bin and --etcd are required (make bench-events sets them)")
	}
	started := time.Now()
	m := machineFacts()
	dir, err := os.MkdirTemp("/tmp", "nsb-ev-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	// the shims' state on a tmpfs, as /run on a node
	state := filepath.Join(dir, "state")
	if err := os.Mkdir(state, 0o711); err != nil {
		return err
	}
	if err := unix.Mount("nstarget-bench", state, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=0711,size=64m"); err != nil {
		return fmt.Errorf("tmpfs for the shims' state: %w", err)
	}
	defer unix.Unmount(state, unix.MNT_DETACH)
	m.stateDir = "tmpfs (as /run on a node)"

	kube, err := cluster.Start(ctx, cluster.Options{Dir: filepath.Join(dir, "k"), Bin: o.kubeBin, Etcd: o.etcd, RemoteNode: true})
	if err != nil {
		return err
	}
	defer func() { kube.Stop(); kube.Close() }()
	node, err := kube.NodeKubeconfig("bench-node", kube.Server())
	if err != nil {
		return err
	}
	onKC := filepath.Join(dir, "node.kubeconfig")
	if err := os.WriteFile(onKC, node, 0o600); err != nil {
		return err
	}
	// an apiserver that accepts connections and never answers
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer silent.Close()
	var held []net.Conn
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			held = append(held, c) // never read, never answered
		}
	}()
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	silentKC := filepath.Join(dir, "silent.kubeconfig")
	if err := os.WriteFile(silentKC, []byte(strings.Replace(string(node), kube.Server(), "https://"+silent.Addr().String(), 1)), 0o600); err != nil {
		return err
	}

	env, err := harness.Start(ctx, "")
	if err != nil {
		return err
	}
	defer env.Close()
	if err := env.PullImages(ctx, env.Containerd.Endpoint()); err != nil {
		return err
	}
	shimBin, _ := filepath.Abs(o.shimBin)
	version, err := shimVersion(shimBin)
	if err != nil {
		return err
	}
	m.shim = version
	var sides [nEv]side
	var shims [nEv]*harness.Shim
	dc, err := dial(env.Containerd.Endpoint())
	if err != nil {
		return err
	}
	defer dc.Close()
	sides[evDirect] = side{name: evNames[evDirect], rt: runtimeapi.NewRuntimeServiceClient(dc)}
	for k, kc := range map[int]string{evOff: "", evOn: onKC, evSilent: silentKC} {
		s, err := harness.StartShim(ctx, shimBin, filepath.Join(state, strconv.Itoa(k)), env.Containerd,
			"--log-level", "info", "--metrics-address", "127.0.0.1:0", "--events-kubeconfig="+kc)
		if err != nil {
			return fmt.Errorf("%s: %w", evNames[k], err)
		}
		defer s.Close()
		shims[k] = s
		sides[k] = side{name: evNames[k], rt: s.Runtime, pid: s.PID()}
	}
	if v, err := sides[evDirect].rt.Version(ctx, &runtimeapi.VersionRequest{}); err == nil {
		m.containerd = fmt.Sprintf("%s %s (private)", v.GetRuntimeName(), v.GetRuntimeVersion())
	}

	// the pod, in the apiserver (so that the events are posted on it) and
	// on the node, with a running target
	uid, err := apiPod(ctx, kube, "bench-app")
	if err != nil {
		return err
	}
	b := &bench{o: options{image: env.BusyboxImage}}
	cfg := &runtimeapi.PodSandboxConfig{
		Metadata: &runtimeapi.PodSandboxMetadata{Name: "bench-app", Uid: uid, Namespace: "default"},
		Linux: &runtimeapi.LinuxPodSandboxConfig{SecurityContext: &runtimeapi.LinuxSandboxSecurityContext{
			NamespaceOptions: &runtimeapi.NamespaceOption{Network: runtimeapi.NamespaceMode_NODE, Pid: runtimeapi.NamespaceMode_CONTAINER}}},
	}
	r, err := sides[evOff].rt.RunPodSandbox(ctx, &runtimeapi.RunPodSandboxRequest{Config: cfg})
	if err != nil {
		return err
	}
	sb := r.GetPodSandboxId()
	defer b.removePod(sides[evOff], sb)
	app, err := b.container(ctx, sides[evOff], sb, cfg, "app", &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_CONTAINER})
	if err != nil {
		return err
	}
	if _, err := sides[evOff].rt.StartContainer(ctx, &runtimeapi.StartContainerRequest{ContainerId: app}); err != nil {
		return err
	}

	fmt.Printf("• TARGET CreateContainer, %d a side: %s ...\n", o.count, strings.Join(evNames[:], ", "))
	var ds [nEv][]time.Duration
	ns := &runtimeapi.NamespaceOption{Pid: runtimeapi.NamespaceMode_TARGET, TargetId: app}
	for i := 0; i < nEv*o.count; i++ {
		k := order(nEv, i)
		c := sides[k]
		start := time.Now()
		id, err := b.container(ctx, c, sb, cfg, fmt.Sprintf("dbg-%d", i), ns)
		if err != nil {
			return err
		}
		ds[k] = append(ds[k], time.Since(start))
		c.rt.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id})
	}

	var out strings.Builder
	fmt.Fprintf(&out, "\n| side | CreateContainer, pid TARGET: min / p50 / p99 | over containerd's own, p50 (pairwise) | over events off, p50 (pairwise) | events (cri_nstarget_events_total) |\n|---|---|---|---|---|\n")
	for k := range nEv {
		st := summarize(ds[k])
		over := func(from int) string {
			return fmt.Sprintf("%s (%s)", signed(st.med-summarize(ds[from]).med), signed(shift(ds[from], ds[k])))
		}
		vsOff, counted := "–", "–"
		if k != evDirect {
			counted = eventCounts(shims[k])
			if k != evOff {
				vsOff = over(evOff)
			}
		}
		vsOwn := "–"
		if k != evDirect {
			vsOwn = over(evDirect)
		}
		fmt.Fprintf(&out, "| %s | %s | %s | %s | %s |\n", evNames[k], st, vsOwn, vsOff, counted)
	}
	rss := make([]string, 0, 3)
	for _, k := range []int{evOff, evOn, evSilent} {
		rss = append(rss, fmt.Sprintf("%s %.1f MiB", evNames[k], float64(rssKiB(sides[k].pid))/1024))
	}
	fmt.Fprintf(&out, "\nRSS after the measure: %s.\n", strings.Join(rss, ", "))
	// SIGTERM: the events still queued are posted while shutdown_timeout
	// (10 s) lasts, then dropped; the silent apiserver's shim must stop
	// within it
	stops := make([]string, 0, 3)
	for _, k := range []int{evOff, evOn, evSilent} {
		t0 := time.Now()
		err := shims[k].Stop()
		took := time.Since(t0)
		stops = append(stops, fmt.Sprintf("%s %s", evNames[k], took.Round(10*time.Millisecond)))
		if err != nil {
			stops[len(stops)-1] += " (" + err.Error() + ")"
		}
	}
	fmt.Fprintf(&out, "SIGTERM to exit (shutdown_timeout 10s): %s.\n", strings.Join(stops, ", "))
	fmt.Fprintf(&out, "\n`nstarget-bench events %s` on %s; %s; cri-nstarget %s; kube-apiserver from %s; %d creates a side, sides interleaved; %s.\n",
		strings.Join(args, " "), m.cpuModel, m.containerd, m.shim, o.kubeBin, o.count, time.Since(started).Round(time.Second))
	fmt.Print(out.String())
	if o.keepLogs != "" {
		os.MkdirAll(o.keepLogs, 0o755)
		for k, s := range shims {
			if s != nil {
				b, _ := os.ReadFile(s.LogPath())
				os.WriteFile(filepath.Join(o.keepLogs, strings.ReplaceAll(evNames[k], " ", "-")+".log"), b, 0o644)
			}
		}
	}
	return nil
}

// apiPod creates the pod name in the apiserver, bound to a node no kubelet
// runs (nothing starts it), and returns its uid.
func apiPod(ctx context.Context, kube *cluster.Cluster, name string) (string, error) {
	manifest := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":%q,"namespace":"default"},`+
		`"spec":{"nodeName":"bench-node","automountServiceAccountToken":false,"containers":[{"name":"app","image":"busybox"}]}}`, name)
	if err := kube.Apply(ctx, manifest); err != nil {
		return "", err
	}
	out, err := kube.Kubectl(ctx, "get", "pod", name, "-o", "json")
	if err != nil {
		return "", err
	}
	var p struct{ Metadata struct{ UID string } }
	if err := json.Unmarshal([]byte(out), &p); err != nil || p.Metadata.UID == "" {
		return "", fmt.Errorf("pod %s: no uid (%v)", name, err)
	}
	return p.Metadata.UID, nil
}

var eventsTotalRE = regexp.MustCompile(`(?m)^cri_nstarget_events_total\{mode="[^"]+",reason="([^"]+)",result="([^"]+)"\} (\S+)$`)

// eventCounts is what shim s's metrics say became of its events, the
// non-zero series.
func eventCounts(s *harness.Shim) string {
	addr := harness.MetricsAddr(s.LogPath())
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Get("http://" + addr + "/metrics")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	var parts []string
	for _, m := range eventsTotalRE.FindAllStringSubmatch(string(text), -1) {
		if m[3] != "0" {
			parts = append(parts, fmt.Sprintf("%s %s: %s", m[2], m[1], m[3]))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}
