package harness

import (
	"encoding/json"
	"slices"
	"testing"
)

func TestUnquoteFields(t *testing.T) {
	in := []string{"FORWARD", "-i", "br0", "-m", "comment", "--comment", `"pod`, "traffic", `stays"`, "-j", "DROP"}
	want := []string{"FORWARD", "-i", "br0", "-m", "comment", "--comment", "pod traffic stays", "-j", "DROP"}
	if got := unquoteFields(in); !slices.Equal(got, want) {
		t.Errorf("unquoteFields = %q, want %q", got, want)
	}
}

func TestBridgeConfList(t *testing.T) {
	b := &Bridge{Name: "nstbr000001", Subnet: "10.254.99.0/24", Dir: "/tmp/nsm-1/net"}
	var conf struct {
		Name    string `json:"name"`
		Plugins []struct {
			Type   string `json:"type"`
			Bridge string `json:"bridge"`
			IPMasq bool   `json:"ipMasq"`
			IPAM   struct {
				DataDir string `json:"dataDir"`
			} `json:"ipam"`
		} `json:"plugins"`
	}
	if err := json.Unmarshal([]byte(b.ConfList()), &conf); err != nil {
		t.Fatal(err)
	}
	if len(conf.Plugins) != 2 || conf.Plugins[0].Type != "bridge" || conf.Plugins[0].Bridge != b.Name ||
		conf.Plugins[0].IPMasq || conf.Plugins[0].IPAM.DataDir != "/tmp/nsm-1/net/ipam" || conf.Plugins[1].Type != "portmap" {
		t.Errorf("conflist = %s", b.ConfList())
	}
}
