//go:build integration

package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// eventsAPI stands in for kube-apiserver where the integration suite needs
// the Events a cri-nstarget posts (the e2e suite runs the real one): plain
// HTTP, anonymous, the pods it is told of readable (as client-go's metadata
// client asks), and every Event posted kept as it came.
type eventsAPI struct {
	srv *httptest.Server

	mu     sync.Mutex
	pods   map[string]string // "namespace/name" -> uid
	events []postedEvent
}

// postedEvent is the part of a core/v1 Event the tests look at.
type postedEvent struct {
	Type, Reason, Message string
	InvolvedObject        struct{ Kind, Namespace, Name, UID, FieldPath string }
}

func newEventsAPI(t *testing.T) *eventsAPI {
	t.Helper()
	a := &eventsAPI{pods: map[string]string{}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.srv.Close)
	return a
}

// addPod makes the pod readable, as the apiserver holds it.
func (a *eventsAPI) addPod(p pod) {
	m := p.cfg.GetMetadata()
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pods[m.GetNamespace()+"/"+m.GetName()] = m.GetUid()
}

func (a *eventsAPI) serve(w http.ResponseWriter, r *http.Request) {
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/"), "/")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && len(parts) == 3 && parts[1] == "pods":
		a.mu.Lock()
		uid, ok := a.pods[parts[0]+"/"+parts[2]]
		a.mu.Unlock()
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"pods %q not found"}`, parts[2])
			return
		}
		fmt.Fprintf(w, `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1","metadata":{"name":%q,"namespace":%q,"uid":%q,"resourceVersion":"7"}}`,
			parts[2], parts[0], uid)
	case r.Method == http.MethodPost && len(parts) == 2 && parts[1] == "events":
		b, _ := io.ReadAll(r.Body)
		var e postedEvent
		if err := json.Unmarshal(b, &e); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		a.mu.Lock()
		a.events = append(a.events, e)
		a.mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		w.Write(b)
	default:
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"no route for %s %s"}`, r.Method, r.URL.Path)
	}
}

// kubeconfig writes a kubeconfig for a (anonymous, plain HTTP) under dir.
func (a *eventsAPI) kubeconfig(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "kubeconfig")
	kc := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: %s\nusers:\n- name: u\n  user: {}\n"+
		"contexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\n", a.srv.URL)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// eventOn waits (10 s) for the Event on container name of pod p with
// reason, and returns it.
func (a *eventsAPI) eventOn(t *testing.T, p pod, name, reason string) postedEvent {
	t.Helper()
	m := p.cfg.GetMetadata()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		a.mu.Lock()
		for _, e := range a.events {
			o := e.InvolvedObject
			if e.Reason == reason && o.Kind == "Pod" && o.Namespace == m.GetNamespace() && o.Name == m.GetName() && o.UID == m.GetUid() &&
				o.FieldPath == "spec.ephemeralContainers{"+name+"}" {
				a.mu.Unlock()
				return e
			}
		}
		seen := fmt.Sprintf("%+v", a.events)
		a.mu.Unlock()
		if time.Now().After(deadline) {
			t.Fatalf("no Event %s on %s/%s's container %s within 10 s; posted: %s", reason, m.GetNamespace(), m.GetName(), name, seen)
		}
	}
}
