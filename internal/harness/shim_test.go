package harness

import (
	"os"
	"path/filepath"
	"testing"
)

// MetricsAddr is the address of the last start's "serving metrics" line.
func TestMetricsAddr(t *testing.T) {
	log := filepath.Join(t.TempDir(), "shim.log")
	if got := MetricsAddr(log); got != "" {
		t.Errorf("no log: %q", got)
	}
	lines := `time="x" level=info msg="serving metrics" address="127.0.0.1:4001"
time="x" level=info msg="serving CRI"
time="x" level=info msg="serving metrics" address="127.0.0.1:4002"
`
	if err := os.WriteFile(log, []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := MetricsAddr(log); got != "127.0.0.1:4002" {
		t.Errorf("MetricsAddr = %q, want the last start's 127.0.0.1:4002", got)
	}
}
