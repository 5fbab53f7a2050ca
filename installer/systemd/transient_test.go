package systemd

import (
	"testing"
	"time"

	"github.com/cri-nstarget/cri-nstarget/installer"
)

// TestTimerUnits: the properties have the D-Bus types systemd's
// StartTransientUnit takes (a wrong one is refused by systemd with
// "Invalid argument"), and the commands go in order.
func TestTimerUnits(t *testing.T) {
	timer, aux, err := timerUnits(installer.Timer{Name: "g.timer", Service: "g.service", After: 2 * time.Minute,
		Commands: [][]string{{"/bin/cp", "-p", "a", "b"}, {"/bin/systemctl", "restart", "kubelet.service"}}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"Description": "s", "TimersMonotonic": "a(st)", "AccuracyUSec": "t", "Type": "s", "ExecStart": "a(sasb)", "CollectMode": "s"}
	for _, p := range append(timer, aux[0].Properties...) {
		if got := p.Value.Signature().String(); got != want[p.Name] {
			t.Errorf("%s: signature %s, want %s", p.Name, got, want[p.Name])
		}
	}
	if aux[0].Name != "g.service" {
		t.Errorf("aux unit %s", aux[0].Name)
	}
	execs := aux[0].Properties[2].Value.Value().([]execStart)
	if len(execs) != 2 || execs[0].Path != "/bin/cp" || execs[1].Args[2] != "kubelet.service" {
		t.Errorf("ExecStart %+v", execs)
	}
	if m := timer[1].Value.Value().([]monotonicTimer); m[0].Base != "OnActiveSec" || m[0].USec != 120_000_000 {
		t.Errorf("TimersMonotonic %+v, want OnActiveSec in µs", m)
	}
	if _, _, err := timerUnits(installer.Timer{Name: "g.timer", Service: "g.service", After: time.Second, Commands: [][]string{{"cp"}}}); err == nil {
		t.Error("a relative command was taken")
	}
}
