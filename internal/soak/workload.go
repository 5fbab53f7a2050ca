package soak

import (
	"context"
	"fmt"
	"math/rand"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/cri-nstarget/cri-nstarget/internal/cluster"
)

// podKind is what a pod's target container does.
type podKind int

const (
	kindRun   podKind = iota // "app" runs; "side" runs beside it
	kindCrash                // "crash" lives crashSleep, exits 3 and is restarted; "keeper" runs
	kindExit                 // "done" exits 0 after a moment, never restarted; "keeper" runs
)

func (k podKind) String() string { return [...]string{"run", "crash", "exit"}[k] }

// printNS is what every container the soak makes prints first: its PID
// namespace, "pid:[INODE]", the line the oracle compares.
const printNS = "readlink /proc/self/ns/pid; "

// runners are the containers that run for the pod's lifetime: the ones
// whose readiness says the pod is back after a fault (the pods with a
// crash-looping or exited target are never Ready as a whole).
var runners = map[string]bool{"app": true, "side": true, "keeper": true}

// podFor is pod number i of kind k: every container has a PID namespace of
// its own (shareProcessNamespace false), pods name the node and mount no
// service-account token, as in e2e/.
func podFor(name string, k podKind, image string) *corev1.Pod {
	c := func(name, script string) corev1.Container {
		return corev1.Container{Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"sh", "-c", printNS + script}}
	}
	sleep := "exec sleep 3600000"
	var containers []corev1.Container
	restart := corev1.RestartPolicyAlways
	switch k {
	case kindRun:
		containers = []corev1.Container{c("app", sleep), c("side", sleep)}
	case kindCrash:
		containers = []corev1.Container{c("crash", "sleep 8; exit 3"), c("keeper", sleep)}
	case kindExit:
		containers = []corev1.Container{c("done", "sleep 3; exit 0"), c("keeper", sleep)}
		restart = corev1.RestartPolicyOnFailure
	}
	no, grace := false, int64(1)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"soak": k.String()}},
		Spec: corev1.PodSpec{
			NodeName:                      cluster.NodeName,
			AutomountServiceAccountToken:  &no,
			EnableServiceLinks:            &no,
			ShareProcessNamespace:         &no,
			DNSPolicy:                     corev1.DNSDefault,
			TerminationGracePeriodSeconds: &grace,
			RestartPolicy:                 restart,
			Containers:                    containers,
		},
	}
}

// debugScript is what every debug container runs: its PID namespace, the
// processes it sees, and whether it can read its PID 1's root.
const debugScript = printNS + "ps -o pid,args; ls /proc/1/root >/dev/null && echo root-readable"

// debugContainer is the ephemeral container name, with --target.
func debugContainer(name, target, image string) corev1.EphemeralContainer {
	return corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: name, Image: image, ImagePullPolicy: corev1.PullIfNotPresent,
			Command: []string{"sh", "-c", debugScript},
		},
		TargetContainerName: target,
	}
}

// debugReq is one debug container the soak asked for, until it is judged.
type debugReq struct {
	pod, name, target string
	asked             time.Time
	killed            bool   // its target was killed as it was being made
	lastErr           string // the kubelet's last waiting message for it, if any
	lastReason        string // and its reason (CreateContainerError, RunContainerError...)
}

// workload makes the pods and the debug containers. Its state is owned by
// the workload's goroutines under mu.
type workload struct {
	api   *api
	image string
	rng   *rand.Rand // under mu
	log   func(format string, args ...any)

	mu      sync.Mutex
	serial  int                  // the next pod or debug container number
	live    map[string]podKind   // pods made and not deleted by the soak
	pending map[string]*debugReq // "pod/name"
	made    int                  // pods made
	asked   int                  // debug containers asked for
	errs    map[string]int       // apiserver errors by call
}

func newWorkload(a *api, image string, seed int64, log func(string, ...any)) *workload {
	return &workload{api: a, image: image, rng: rand.New(rand.NewSource(seed + 1)), log: log,
		live: map[string]podKind{}, pending: map[string]*debugReq{}, errs: map[string]int{}}
}

func (w *workload) count(call string, err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	w.errs[call]++
	w.mu.Unlock()
}

// makePod makes a pod of kind k.
func (w *workload) makePod(ctx context.Context, k podKind) {
	w.mu.Lock()
	w.serial++
	name := fmt.Sprintf("soak-%s-%d", k, w.serial)
	w.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err := w.api.createPod(cctx, podFor(name, k, w.image))
	w.count("create pod", err)
	if err == nil {
		w.mu.Lock()
		w.live[name] = k
		w.made++
		w.mu.Unlock()
	}
}

// replace deletes one of the soak's pods at random and makes another of the
// same kind.
func (w *workload) replace(ctx context.Context) {
	name, k, ok := w.pick(nil)
	if !ok {
		return
	}
	w.deletePod(ctx, name)
	w.makePod(ctx, k)
}

func (w *workload) deletePod(ctx context.Context, name string) {
	w.mu.Lock()
	delete(w.live, name)
	w.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	w.count("delete pod", w.api.deletePod(cctx, name))
}

// pick is a random pod of the soak's that ok accepts (nil: any).
func (w *workload) pick(ok func(string) bool) (string, podKind, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var names []string
	for n := range w.live {
		if ok == nil || ok(n) {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "", 0, false
	}
	// map order is random but not seeded: sort for the seed's sake
	sortStrings(names)
	n := names[w.rng.Intn(len(names))]
	return n, w.live[n], true
}

// debug adds a debug container to pod with --target; the target is one of
// the pod's containers at random when target is "".
func (w *workload) debug(ctx context.Context, pod, target string, killed bool) (*debugReq, error) {
	w.mu.Lock()
	if target == "" {
		var cs []string
		switch w.live[pod] {
		case kindRun:
			cs = []string{"app", "side"}
		case kindCrash:
			cs = []string{"crash", "keeper"}
		case kindExit:
			cs = []string{"done", "keeper"}
		}
		target = cs[w.rng.Intn(len(cs))]
	}
	w.serial++
	d := &debugReq{pod: pod, name: fmt.Sprintf("dbg-%d", w.serial), target: target, asked: time.Now(), killed: killed}
	w.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	err := w.api.addEphemeral(cctx, pod, debugContainer(d.name, target, w.image))
	w.count("add debug container", err)
	if err != nil {
		return nil, err
	}
	w.mu.Lock()
	w.pending[pod+"/"+d.name] = d
	w.asked++
	w.mu.Unlock()
	return d, nil
}

// debugRandom debugs a random pod, one that has run for a few seconds.
func (w *workload) debugRandom(ctx context.Context) {
	if pod, _, ok := w.pick(nil); ok {
		_, _ = w.debug(ctx, pod, "", false)
	}
}

// every runs f every d (jittered by the workload's rng) until ctx ends.
func (w *workload) every(ctx context.Context, d time.Duration, f func(context.Context)) {
	for {
		w.mu.Lock()
		j := time.Duration(w.rng.Int63n(int64(d))) + d/2
		w.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(j):
		}
		f(ctx)
	}
}

func sortStrings(s []string) { slices.Sort(s) }
