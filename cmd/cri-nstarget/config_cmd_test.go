package main

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	conf "github.com/cri-nstarget/cri-nstarget/config"
)

func TestConfigCommand(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.toml")
	os.WriteFile(good, []byte("strict_targeting = true\nmetrics_address = \"127.0.0.1:9795\"\n"), 0o644)
	bad := filepath.Join(dir, "bad.toml")
	os.WriteFile(bad, []byte("log_format = \"xml\"\n"), 0o644)
	defaults, _ := conf.Default().Marshal()
	kubelet := filepath.Join(dir, "kubelet.conf")
	os.WriteFile(kubelet, []byte(kubeconfig("client-certificate-data: "+testCertData(t, "system:node:worker-1")+"\n    client-key-data: eA==")), 0o600)
	execs := filepath.Join(dir, "exec.conf")
	os.WriteFile(execs, []byte(kubeconfig("exec: {apiVersion: client.authentication.k8s.io/v1, command: aws, args: [eks, get-token], interactiveMode: Never}")), 0o600)
	for _, tc := range []struct {
		args    []string
		code    int
		stdout  []string // substrings
		stderr  string
		exactly []byte
	}{
		{args: []string{"default"}, exactly: defaults},
		{args: []string{"check", "--config", good, "--log-level", "debug"}, stdout: []string{"strict_targeting = true", "metrics_address = '127.0.0.1:9795'", "log_level = 'debug'"}},
		{args: []string{"check", "--config", bad}, code: 2, stderr: bad + `:1: log_format: "xml" is not a log format`},
		{args: []string{"check", "--config", filepath.Join(dir, "absent.toml")}, code: 2, stderr: "no such file"},
		{args: []string{"check", "--config=", "--events-kubeconfig", kubelet}, stdout: []string{"# events on pods: posted to https://10.0.0.1:6443 as system:node:worker-1 (node worker-1), with " + kubelet + "\n"}},
		{args: []string{"check", "--config=", "--events-kubeconfig", execs}, stdout: []string{`# events on pods: none: kubeconfig ` + execs + ` needs the exec plugin "aws", and cri-nstarget executes nothing`}},
		{args: []string{"check", "--config=", "--events-kubeconfig", filepath.Join(dir, "later.conf")}, stdout: []string{"later.conf does not exist yet; the shim reads it when the first event is due"}},
		{args: []string{"check", "--config=", "--events-kubeconfig="}, stdout: []string{"# events on pods: off (events_kubeconfig is empty)\n"}},
		{args: []string{"default", "x"}, code: 2, stderr: "unexpected arguments"},
		{args: []string{"dump"}, code: 2, stderr: `unknown command "dump"`},
		{args: nil, code: 2, stderr: "usage:"},
	} {
		var stdout, stderr bytes.Buffer
		code := configCommand(tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stderr.String(), tc.stderr) {
			t.Errorf("config %q: exit %d, stderr %q; want %d, %q", tc.args, code, stderr.String(), tc.code, tc.stderr)
		}
		for _, s := range tc.stdout {
			if !strings.Contains(stdout.String(), s) {
				t.Errorf("config %q: stdout lacks %q:\n%s", tc.args, s, stdout.String())
			}
		}
		if tc.exactly != nil && !bytes.Equal(stdout.Bytes(), tc.exactly) {
			t.Errorf("config %q: stdout\n%s\nwant\n%s", tc.args, stdout.String(), tc.exactly)
		}
	}
}

func TestParseFlags(t *testing.T) {
	file := filepath.Join(t.TempDir(), "c.toml")
	os.WriteFile(file, []byte("shutdown_timeout = \"3s\"\nmetrics_address = \"127.0.0.1:1\"\nstrict_targeting = true\n"), 0o644)
	cfg, version, err := parseFlags([]string{"--config", file, "--metrics-address", "127.0.0.1:0"}, new(bytes.Buffer))
	if err != nil || version {
		t.Fatalf("parseFlags: %v, version=%v", err, version)
	}
	if time.Duration(cfg.ShutdownTimeout) != 3*time.Second || cfg.MetricsAddress != "127.0.0.1:0" || !cfg.StrictTargeting || cfg.Listen != "unix:///run/cri-nstarget/cri.sock" {
		t.Errorf("parseFlags = %+v", cfg)
	}
	// --version does not depend on a usable configuration.
	bad := filepath.Join(t.TempDir(), "bad.toml")
	os.WriteFile(bad, []byte("nonsense = 1\n"), 0o644)
	if _, version, err := parseFlags([]string{"--config", bad, "--version"}, new(bytes.Buffer)); err != nil || !version {
		t.Errorf("--version with a bad config: %v, version=%v", err, version)
	}
	var out bytes.Buffer
	if _, _, err := parseFlags([]string{"--config", bad}, &out); err == nil || !strings.Contains(out.String(), "bad.toml:1: nonsense: unknown key") {
		t.Errorf("bad config: %v, output %q", err, out.String())
	}
}

// TestMain runs main itself when asked to, so that tests can see its exit
// status as a user would.
func TestMain(m *testing.M) {
	if os.Getenv("NST_RUN_MAIN") == "1" {
		os.Args = append([]string{"cri-nstarget"}, strings.Fields(os.Getenv("NST_ARGS"))...)
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestExitStatus: asking for help is no error (0); a bad flag is (2).
func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args   string
		status int
		out    string
	}{
		{"-h", 0, "-listen"},
		{"--help", 0, "-state-dir"},
		{"--no-such-flag", 2, "flag provided but not defined"},
		{"--config= --listen run/x.sock", 2, "want unix:///absolute/path or /absolute/path"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "NST_RUN_MAIN=1", "NST_ARGS="+tc.args)
		out, err := cmd.CombinedOutput()
		status := 0
		if ee, ok := err.(*exec.ExitError); ok {
			status = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if status != tc.status || !strings.Contains(string(out), tc.out) {
			t.Errorf("cri-nstarget %s: exit %d, output %q; want exit %d and %q", tc.args, status, out, tc.status, tc.out)
		}
	}
}

// kubeconfig is a kubeconfig for https://10.0.0.1:6443 with user as its
// user's body.
func kubeconfig(user string) string {
	return `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://10.0.0.1:6443"}
users:
- name: u
  user:
    ` + user + `
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`
}

// testCertData is a self-signed certificate for cn, base64 PEM as a
// kubeconfig's client-certificate-data holds it.
func testCertData(t *testing.T, cn string) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn}, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
