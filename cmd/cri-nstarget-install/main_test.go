package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
)

func TestParse(t *testing.T) {
	t.Setenv("NODE_NAME", "n1")
	t.Setenv("POD_NAMESPACE", "cri-nstarget")
	o, err := parse([]string{"install", "--max-concurrent-restarts=3"})
	if err != nil || o.mode != "install" || o.restarts != 3 || o.root != "/host" || o.node != "n1" {
		t.Errorf("parse: %+v %v", o, err)
	}
	for _, args := range [][]string{{}, {"uninstall"}, {"cleanup", "--max-concurrent-restarts=0"}} {
		if _, err := parse(args); err == nil {
			t.Errorf("parse(%q): no error", args)
		}
	}
	t.Setenv("NODE_NAME", "")
	if _, err := parse([]string{"cleanup"}); err == nil || !strings.Contains(err.Error(), "NODE_NAME") {
		t.Errorf("parse without NODE_NAME: %v", err)
	}
}

// The shim's events kubeconfig: the token's identity, at the apiserver this
// pod reaches; none when no token is mounted.
func TestEventsKubeconfig(t *testing.T) {
	log := logrus.NewEntry(logrus.New())
	if b, err := eventsKubeconfig(context.Background(), filepath.Join(t.TempDir(), "none"), "https://10.96.0.1:443", log); b != nil || err != nil {
		t.Errorf("no token mounted: %s %v", b, err)
	}
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "token"), []byte("tok\n"), 0o600)
	os.WriteFile(filepath.Join(dir, "ca.crt"), []byte("CA"), 0o600)
	b, err := eventsKubeconfig(context.Background(), dir, "https://10.96.0.1:443", log)
	if err != nil {
		t.Fatal(err)
	}
	var kc struct {
		Clusters []struct {
			Cluster struct {
				Server string
				CA     string `json:"certificate-authority-data"`
			}
		}
		Users []struct{ User struct{ Token string } }
	}
	if err := json.Unmarshal(b, &kc); err != nil {
		t.Fatal(err)
	}
	if len(kc.Clusters) != 1 || kc.Clusters[0].Cluster.Server != "https://10.96.0.1:443" || kc.Clusters[0].Cluster.CA != base64.StdEncoding.EncodeToString([]byte("CA")) ||
		len(kc.Users) != 1 || kc.Users[0].User.Token != "tok" {
		t.Errorf("kubeconfig:\n%s", b)
	}
}
