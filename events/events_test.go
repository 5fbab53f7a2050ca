package events

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

var update = flag.Bool("update", false, "write the golden files of testdata/")

// at is the clock of the golden tests.
var at = time.Date(2026, 11, 26, 14, 30, 0, 123456789, time.UTC)

func newSink(t *testing.T, opts Options) (*Sink, *counts) {
	t.Helper()
	m := &counts{}
	opts.Metrics, opts.Log = m, quietLog()
	if opts.Backoff == 0 {
		opts.Backoff = time.Millisecond
	}
	s := New(opts)
	t.Cleanup(func() { s.Close(context.Background()) })
	return s, m
}

// flush closes s, letting it post what is queued.
func flush(s *Sink) { s.Close(context.Background()) }

var dbg = Event{Pod: Pod{Namespace: "shop", Name: "web", UID: "0d6c"}, Container: "dbg", Warning: true,
	Reason: "TargetingFallback", Message: "Container dbg runs in the pod's pid namespace, not in target container app's."}

// The Event as the apiserver receives it, shaped as the kubelet's own
// (golden files): the pod with its uid and resourceVersion as
// involvedObject, the container's fieldPath, source cri-nstarget on the node
// of the kubelet's identity, count 1, first and last timestamp now.
func TestEventAsPosted(t *testing.T) {
	for _, tc := range []struct {
		golden string
		e      Event
	}{
		{"warning.json", dbg},
		{"normal.json", Event{Pod: dbg.Pod, Container: "dbg", Reason: "Targeted", Message: "Container dbg joined the pid namespace of target container app (pinned by cri-nstarget): it sees app's processes."}},
		{"node.json", nodeEvent},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			api := newFakeAPI(t)
			api.addPod("shop", "web", "0d6c")
			kc, _ := api.kubeconfig(t, t.TempDir(), "system:node:worker-1")
			s, m := newSink(t, Options{Kubeconfig: kc})
			s.now = func() time.Time { return at }
			s.Post(tc.e)
			flush(s)
			posted := api.posted()
			if len(posted) != 1 || m.get("sent/none") != 1 {
				t.Fatalf("posted %d events, counted %v", len(posted), m)
			}
			// Every field posted is one of core/v1's Event (the shim builds
			// it without linking that type), and the golden file is the
			// Event as that type reads it.
			var ev corev1.Event
			dec := json.NewDecoder(bytes.NewReader(posted[0]))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&ev); err != nil {
				t.Fatalf("posted what is not a core/v1 Event: %v\n%s", err, posted[0])
			}
			b, err := json.MarshalIndent(&ev, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got := bytes.NewBuffer(append(b, '\n'))
			path := filepath.Join("testdata", tc.golden)
			if *update {
				if err := os.WriteFile(path, got.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got.Bytes(), want) {
				t.Errorf("posted:\n%s\nwant (%s):\n%s", got.Bytes(), path, want)
			}
		})
	}
}

var nodeEvent = Event{Node: true, Warning: true, Reason: "PluginUnsupported",
	Message: "cri-nstarget (mode plugin) does nothing on this node: the runtime's NRI version \"v0.8.0\" cannot adjust namespaces (needs v0.10.0)"}

// Options.Node names the node the Events come from, and the one an Event
// with Node is about, whatever the identity (a service account's token
// names none): the plugin mode's pod is told it by the downward API.
func TestNodeNamed(t *testing.T) {
	api := newFakeAPI(t)
	api.addPod("shop", "web", "0d6c")
	kc, _ := api.kubeconfig(t, t.TempDir(), "cri-nstarget-plugin")
	s, m := newSink(t, Options{Kubeconfig: kc, Node: "worker-2"})
	s.Post(nodeEvent)
	s.Post(dbg)
	flush(s)
	posted := api.posted()
	if len(posted) != 2 || m.get("sent/none") != 2 {
		t.Fatalf("posted %d events, counted %v", len(posted), m)
	}
	var evs [2]corev1.Event
	for i := range evs {
		if err := json.Unmarshal(posted[i], &evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	if o := evs[0].InvolvedObject; o.Kind != "Node" || o.Name != "worker-2" || evs[0].Namespace != "default" {
		t.Errorf("the node's Event is about %s %s, in the namespace %q: want Node worker-2, in default", o.Kind, o.Name, evs[0].Namespace)
	}
	for _, ev := range evs {
		if ev.Source.Host != "worker-2" || ev.ReportingInstance != "worker-2" {
			t.Errorf("Event %s from %q (%q), want worker-2", ev.Reason, ev.Source.Host, ev.ReportingInstance)
		}
	}
}

// A message is cut at MaxMessage bytes, on a rune's boundary.
func TestMessageBound(t *testing.T) {
	long := strings.Repeat("é", MaxMessage) // 2 bytes each
	ev := newEvent(Event{Pod: dbg.Pod, Container: "dbg", Message: "x" + long}, &metav1.ObjectMeta{Name: "web", UID: types.UID("0d6c")}, "n", at)
	msg, _ := ev.Object["message"].(string)
	if !strings.HasPrefix(msg, "xé") || !json.Valid([]byte(`"`+msg+`"`)) {
		t.Errorf("message of %d bytes: %q...", len(msg), msg[:8])
	}
	if len(msg) != MaxMessage-1 {
		t.Errorf("cut to %d bytes, want %d (the rune boundary below %d)", len(msg), MaxMessage-1, MaxMessage)
	}
}

// What the apiserver answers decides what becomes of an event, and only
// a missing or failing answer is tried again, up to Attempts times.
func TestAnswers(t *testing.T) {
	for _, tc := range []struct {
		name     string
		pods     map[string]string                     // name -> uid
		answer   func(n int) (code int, reason string) // for the nth POST of an event; 0: as the server would
		want     string
		attempts int    // POSTs of events seen
		user     string // the identity; default system:node:worker-1
		getPod   int    // the answer to the GET of the pod; 0: as the server would
	}{
		{"created", map[string]string{"web": "0d6c"}, nil, "sent/none", 1, "", 0},
		{"no such pod (crictl's)", nil, nil, "dropped/pod_not_found", 0, "", 0},
		{"the pod was made again (another uid)", map[string]string{"web": "9f00"}, nil, "dropped/pod_not_found", 0, "", 0},
		{"unavailable, then created", map[string]string{"web": "0d6c"}, func(n int) (int, string) {
			if n < 3 {
				return http.StatusServiceUnavailable, "ServiceUnavailable"
			}
			return 0, ""
		}, "sent/none", 3, "", 0},
		{"always failing", map[string]string{"web": "0d6c"}, func(int) (int, string) { return http.StatusInternalServerError, "InternalError" }, "dropped/unreachable", 3, "", 0},
		{"too many requests", map[string]string{"web": "0d6c"}, func(int) (int, string) { return http.StatusTooManyRequests, "TooManyRequests" }, "dropped/unreachable", 3, "", 0},
		{"forbidden", map[string]string{"web": "0d6c"}, func(int) (int, string) { return http.StatusForbidden, "Forbidden" }, "dropped/forbidden", 1, "", 0},
		{"unauthorized", map[string]string{"web": "0d6c"}, func(int) (int, string) { return http.StatusUnauthorized, "Unauthorized" }, "dropped/unauthorized", 1, "", 0},
		{"invalid", map[string]string{"web": "0d6c"}, func(int) (int, string) { return http.StatusUnprocessableEntity, "Invalid" }, "dropped/rejected", 1, "", 0},
		{"namespace gone", map[string]string{"web": "0d6c"}, func(int) (int, string) { return http.StatusNotFound, "NotFound" }, "dropped/pod_not_found", 1, "", 0},
		// the Node authorizer: a node may read the pods bound to it, and
		// no other, so a pod it may not read is not this node's
		{"a node's identity, a pod not bound to it", nil, nil, "dropped/pod_not_found", 0, "", http.StatusForbidden},
		{"another identity, without permission", nil, nil, "dropped/forbidden", 0, "cri-nstarget-events", http.StatusForbidden},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api := newFakeAPI(t)
			for name, uid := range tc.pods {
				api.addPod("shop", name, uid)
			}
			var posts atomic.Int32
			var mu sync.Mutex
			var postedAt []time.Time
			api.answer = func(w http.ResponseWriter, r *http.Request) bool {
				if r.Method == http.MethodGet && tc.getPod != 0 {
					writeStatus(w, tc.getPod, "Forbidden", `pods "web" is forbidden: node: no relationship found between node 'worker-1' and this object`)
					return true
				}
				if r.Method != http.MethodPost {
					return false
				}
				n := int(posts.Add(1))
				mu.Lock()
				postedAt = append(postedAt, time.Now())
				mu.Unlock()
				if tc.answer == nil {
					return false
				}
				code, reason := tc.answer(n)
				if code == 0 {
					return false
				}
				writeStatus(w, code, reason, "told so")
				return true
			}
			user := tc.user
			if user == "" {
				user = "system:node:worker-1"
			}
			kc, _ := api.kubeconfig(t, t.TempDir(), user)
			const backoff = 20 * time.Millisecond
			s, m := newSink(t, Options{Kubeconfig: kc, Backoff: backoff})
			s.Post(dbg)
			flush(s)
			if m.get(tc.want) != 1 {
				t.Errorf("counted %v, want %s", m, tc.want)
			}
			if n := int(posts.Load()); n != tc.attempts {
				t.Errorf("%d POSTs, want %d", n, tc.attempts)
			}
			// a retry waits the backoff, doubled for each next (a lower
			// bound only: a slow machine waits longer, never shorter)
			for i := 1; i < len(postedAt); i++ {
				if gap, want := postedAt[i].Sub(postedAt[i-1]), backoff<<(i-1); gap < want {
					t.Errorf("POST %d came %v after the one before, want at least the backoff %v", i+1, gap, want)
				}
			}
		})
	}
}

// Post never waits: with the sender held up by an apiserver that does not
// answer, the queue takes QueueSize events and the rest are dropped and
// counted; Close then ends the request in flight and drops what is queued.
func TestQueueBound(t *testing.T) {
	api := newFakeAPI(t)
	api.addPod("shop", "web", "0d6c")
	held := make(chan struct{})
	release := make(chan struct{})
	api.answer = func(w http.ResponseWriter, r *http.Request) bool {
		held <- struct{}{}
		<-release
		return false
	}
	defer close(release)
	kc, _ := api.kubeconfig(t, t.TempDir(), "system:node:worker-1")
	s, m := newSink(t, Options{Kubeconfig: kc, QueueSize: 4})
	s.Post(dbg)
	<-held // the sender holds the first event
	for range 10 {
		s.Post(dbg) // returns at once whatever the apiserver does
	}
	if got := m.get("dropped/queue_full"); got != 6 {
		t.Errorf("%d dropped as queue_full, want 6 (10 posted, 4 queued): %v", got, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	s.Close(ctx)
	if got := m.get("dropped/shutdown"); got != 5 {
		t.Errorf("%d dropped at shutdown, want 5 (1 in flight, 4 queued): %v", got, m)
	}
	s.Post(dbg)
	if got := m.get("dropped/shutdown"); got != 6 {
		t.Errorf("a Post after Close: %v, want it dropped as shutdown", m)
	}
}

// Close lets the sender post what is queued while its context lasts.
func TestCloseFlushes(t *testing.T) {
	api := newFakeAPI(t)
	api.addPod("shop", "web", "0d6c")
	kc, _ := api.kubeconfig(t, t.TempDir(), "system:node:worker-1")
	s, m := newSink(t, Options{Kubeconfig: kc})
	for range 5 {
		s.Post(dbg)
	}
	s.Close(context.Background())
	if n := len(api.posted()); n != 5 || m.get("sent/none") != 5 {
		t.Errorf("posted %d, counted %v; want all 5 sent before Close returned", n, m)
	}
}

// Close does not outlast its context when the apiserver never answers: the
// request in flight is cancelled (no attempt after it, no backoff sleep).
func TestCloseBounded(t *testing.T) {
	api := newFakeAPI(t)
	api.addPod("shop", "web", "0d6c")
	stuck := make(chan struct{})
	defer close(stuck)
	api.answer = func(w http.ResponseWriter, r *http.Request) bool { <-stuck; return true }
	kc, _ := api.kubeconfig(t, t.TempDir(), "system:node:worker-1")
	s, m := newSink(t, Options{Kubeconfig: kc, Backoff: time.Hour})
	s.Post(dbg)
	s.Post(dbg)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	closed := make(chan struct{})
	go func() { s.Close(ctx); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second): // a hang guard, not a timing
		t.Fatal("Close has not returned 30 s after its context ended")
	}
	if got := m.get("dropped/shutdown"); got != 2 {
		t.Errorf("counted %v, want both dropped at shutdown", m)
	}
}

// The token bucket lets Burst events through at once, then QPS a second.
func TestPace(t *testing.T) {
	s, _ := newSink(t, Options{Kubeconfig: "/nonexistent", QPS: 2, Burst: 3})
	t0 := time.Unix(1000, 0)
	for i, tc := range []struct {
		at   time.Duration
		want time.Duration
	}{
		{0, 0}, {0, 0}, {0, 0}, // the burst
		{0, 500 * time.Millisecond}, // the 4th waits for a token (0.5 s at 2 a second)
		{0, time.Second},            // and the 5th for the next
		{10 * time.Second, 0},       // the bucket refills, up to Burst
		{10 * time.Second, 0}, {10 * time.Second, 0},
		{10 * time.Second, 500 * time.Millisecond},
	} {
		if got := s.reserve(t0.Add(tc.at)); got != tc.want {
			t.Errorf("reservation %d at +%s: wait %s, want %s", i, tc.at, got, tc.want)
		}
	}
}

// A kubeconfig that is not there yet (the kubelet writes it after the shim
// started) drops the events until it appears; then they are posted,
// without a restart.
func TestKubeconfigAppears(t *testing.T) {
	api := newFakeAPI(t)
	api.addPod("shop", "web", "0d6c")
	dir := t.TempDir()
	kc := filepath.Join(dir, "kubelet.conf")
	s, m := newSink(t, Options{Kubeconfig: kc})
	s.Post(dbg)
	waitFor(t, func() bool { return m.get("dropped/no_kubeconfig") == 1 }, "the event dropped for want of a kubeconfig")
	made, _ := api.kubeconfig(t, dir, "system:node:worker-1")
	if err := os.Rename(made, kc); err != nil {
		t.Fatal(err)
	}
	s.Post(dbg)
	flush(s)
	if m.get("sent/none") != 1 || len(api.posted()) != 1 {
		t.Errorf("after the kubeconfig appeared: %v, %d posted", m, len(api.posted()))
	}
}

// A kubeconfig written again (another server, say) is read again.
func TestKubeconfigRewritten(t *testing.T) {
	first, second := newFakeAPI(t), newFakeAPI(t)
	first.addPod("shop", "web", "0d6c")
	second.addPod("shop", "web", "0d6c")
	dir := t.TempDir()
	kc, _ := first.kubeconfig(t, dir, "system:node:worker-1")
	s, m := newSink(t, Options{Kubeconfig: kc})
	s.Post(dbg)
	waitFor(t, func() bool { return m.get("sent/none") == 1 }, "the first event sent")
	other, _ := second.kubeconfig(t, t.TempDir(), "system:node:worker-1")
	b, err := os.ReadFile(other)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, kc, string(b))
	s.Post(dbg)
	flush(s)
	if len(first.posted()) != 1 || len(second.posted()) != 1 {
		t.Errorf("posted to the first server %d, to the second %d; want 1 each", len(first.posted()), len(second.posted()))
	}
}

// The kubelet rotates its client certificate in place
// (kubelet-client-current.pem): new connections present the new one,
// client-go reading the files again; no restart, no new kubeconfig.
func TestCertificateRotation(t *testing.T) {
	api := newFakeAPI(t)
	api.addPod("shop", "web", "0d6c")
	kc, cert := api.kubeconfig(t, t.TempDir(), "system:node:old")
	s, m := newSink(t, Options{Kubeconfig: kc})
	s.Post(dbg)
	waitFor(t, func() bool { return m.get("sent/none") == 1 }, "an event sent with the first certificate")
	api.ca.issueTo(t, cert, "system:node:new")
	// client-go caches a certificate for a second, and closes its
	// connections when it sees another; the server closing them makes the
	// next request shake hands again.
	waitFor(t, func() bool {
		api.srv.CloseClientConnections()
		s.Post(dbg)
		time.Sleep(100 * time.Millisecond)
		users := api.requestUsers()
		return users[len(users)-1] == "system:node:new"
	}, "a request with the rotated certificate")
	if got := m.String(); strings.Contains(got, "dropped/unauthorized") || strings.Contains(got, "dropped/bad_kubeconfig") {
		t.Errorf("counted %s across the rotation", got)
	}
}

// A kubeconfig that would run a plugin is refused without running it: the
// shim executes nothing.
func TestExecPluginRefused(t *testing.T) {
	api := newFakeAPI(t)
	dir := t.TempDir()
	marker := filepath.Join(dir, "ran")
	script := filepath.Join(dir, "plugin")
	if err := os.WriteFile(script, []byte("#!/bin/sh\ntouch "+marker+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	kc := filepath.Join(dir, "kubeconfig")
	writeFile(t, kc, kubeconfigYAML(api.srv.URL, nil, "exec: {apiVersion: client.authentication.k8s.io/v1, command: "+script+", interactiveMode: Never}"))
	if _, err := Config(kc); err == nil || !strings.Contains(err.Error(), "executes nothing") {
		t.Errorf("Config = %v, want a refusal saying the shim executes nothing", err)
	}
	s, m := newSink(t, Options{Kubeconfig: kc})
	s.Post(dbg)
	flush(s)
	if m.get("dropped/bad_kubeconfig") != 1 || len(api.requestUsers()) != 0 {
		t.Errorf("counted %v with %d requests; want the event dropped as bad_kubeconfig, no request", m, len(api.requestUsers()))
	}
	if _, err := os.Stat(marker); err == nil {
		t.Error("the exec plugin ran")
	}
}

// The node is NAME of the kubelet's identity system:node:NAME.
func TestNodeOf(t *testing.T) {
	host, _ := os.Hostname()
	for user, want := range map[string]string{
		"system:node:worker-1": "worker-1",
		"system:node:":         strings.ToLower(host),
		"cri-nstarget-events":  strings.ToLower(host),
	} {
		if got := NodeOf(user); got != want {
			t.Errorf("NodeOf(%q) = %q, want %q", user, got, want)
		}
	}
}

// A reason is logged at its first drop, then at most once per interval,
// with the number dropped since.
func TestDropLog(t *testing.T) {
	l := &dropLog{every: time.Minute, last: map[string]time.Time{}, since: map[string]int{}}
	t0 := time.Unix(1000, 0)
	for i, tc := range []struct {
		reason string
		at     time.Duration
		n      int
		ok     bool
	}{
		{"queue_full", 0, 1, true},
		{"queue_full", time.Second, 0, false},
		{"pod_not_found", time.Second, 1, true}, // each reason on its own
		{"queue_full", 30 * time.Second, 0, false},
		{"queue_full", 61 * time.Second, 3, true}, // the two held back, and this one
		{"queue_full", 62 * time.Second, 0, false},
	} {
		n, ok := l.note(tc.reason, t0.Add(tc.at))
		if n != tc.n || ok != tc.ok {
			t.Errorf("%d: note(%s, +%s) = %d, %v; want %d, %v", i, tc.reason, tc.at, n, ok, tc.n, tc.ok)
		}
	}
}

// waitFor polls cond until it holds, failing the test after 10 s.
func waitFor(t *testing.T, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}
