package events

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
)

// The unit tests' apiserver: an HTTPS server that asks for a client
// certificate signed by its CA (as kube-apiserver's --client-ca-file does),
// serves the pods it is given, takes Events, and answers as told. It stands
// in for kube-apiserver only here; the end-to-end tests run the real one.

// fakeAPI is a fake apiserver and the pods it holds.
type fakeAPI struct {
	srv *httptest.Server
	ca  *authority

	mu     sync.Mutex
	pods   map[string]string // "ns/name" -> uid
	events [][]byte          // Event bodies, as posted
	users  []string          // the client certificate's CN of each request
	// answer, if set, answers a request instead (return false to go on).
	answer func(w http.ResponseWriter, r *http.Request) bool
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	a := &fakeAPI{ca: newAuthority(t), pods: map[string]string{}}
	a.srv = httptest.NewUnstartedServer(http.HandlerFunc(a.serve))
	a.srv.TLS = &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: a.ca.pool}
	a.srv.StartTLS()
	t.Cleanup(a.srv.Close)
	return a
}

func (a *fakeAPI) addPod(ns, name, uid string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.pods[ns+"/"+name] = uid
}

func (a *fakeAPI) posted() [][]byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([][]byte(nil), a.events...)
}

func (a *fakeAPI) requestUsers() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.users...)
}

func (a *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	a.mu.Lock()
	if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
		a.users = append(a.users, r.TLS.PeerCertificates[0].Subject.CommonName)
	}
	answer := a.answer
	a.mu.Unlock()
	if answer != nil && answer(w, r) {
		return
	}
	parts := strings.Split(strings.TrimPrefix(r.URL.Path, "/api/v1/namespaces/"), "/")
	switch {
	case r.Method == http.MethodGet && len(parts) == 3 && parts[1] == "pods":
		a.mu.Lock()
		uid, ok := a.pods[parts[0]+"/"+parts[2]]
		a.mu.Unlock()
		if !ok {
			writeStatus(w, http.StatusNotFound, "NotFound", fmt.Sprintf("pods %q not found", parts[2]))
			return
		}
		w.Header().Set("Content-Type", "application/json")
		meta := fmt.Sprintf(`"metadata":{"name":%q,"namespace":%q,"uid":%q,"resourceVersion":"7"}`, parts[2], parts[0], uid)
		if strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata") { // client-go's metadata client
			fmt.Fprintf(w, `{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",%s}`, meta)
			return
		}
		fmt.Fprintf(w, `{"kind":"Pod","apiVersion":"v1",%s,"spec":{"containers":[{"name":"app","image":"busybox"}],`+
			`"ephemeralContainers":[{"name":"dbg","image":"busybox","targetContainerName":"app"}]}}`, meta)
	case r.Method == http.MethodPost && len(parts) == 2 && parts[1] == "events":
		b, _ := io.ReadAll(r.Body)
		a.mu.Lock()
		a.events = append(a.events, b)
		a.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		w.Write(b)
	default:
		writeStatus(w, http.StatusNotFound, "NotFound", "no route for "+r.Method+" "+r.URL.Path)
	}
}

// writeStatus answers as the apiserver does when it refuses: a Status.
func writeStatus(w http.ResponseWriter, code int, reason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": reason, "message": msg, "code": code})
}

// kubeconfig writes a kubeconfig for a's server with a client certificate
// for user in files (as the kubelet's, which rotates them) and returns its
// path; the certificate and key are at certPath.
func (a *fakeAPI) kubeconfig(t *testing.T, dir, user string) (path, certPath string) {
	t.Helper()
	certPath = filepath.Join(dir, "client.pem")
	a.ca.issueTo(t, certPath, user)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.srv.Certificate().Raw})
	path = filepath.Join(dir, "kubeconfig")
	writeFile(t, path, kubeconfigYAML(a.srv.URL, ca, "client-certificate: "+certPath+"\n    client-key: "+certPath))
	return path, certPath
}

func kubeconfigYAML(server string, ca []byte, user string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: u
  user:
    %s
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`, server, b64(ca), user)
}

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil { // as the kubelet replaces its files
		t.Fatal(err)
	}
}

// authority is a CA that issues client certificates.
type authority struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pool *x509.CertPool
}

func newAuthority(t *testing.T) *authority {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &authority{cert: cert, key: key, pool: pool}
}

var serial int64 = 1

// issueTo writes a client certificate for cn and its key, in one PEM file
// at path (as kubelet-client-current.pem holds both), replacing it by a
// rename.
func (ca *authority) issueTo(t *testing.T, path, cn string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial++
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: cn, Organization: []string{"system:nodes"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))+
		string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})))
}

// counts is a Metrics that counts.
type counts struct {
	mu sync.Mutex
	n  map[string]int // "result/reason"
}

func (c *counts) Event(result, reason string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[result+"/"+reason]++
}

func (c *counts) get(key string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[key]
}

func (c *counts) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return fmt.Sprint(c.n)
}

func quietLog() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }
