package main

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestStepsTable: the shims' "create steps" lines become one row per path,
// each step's min / p50 / p99; other lines are ignored.
func TestStepsTable(t *testing.T) {
	log := filepath.Join(t.TempDir(), "shim.log")
	var lines []string
	for i := 1; i <= 10; i++ {
		lines = append(lines,
			`time="x" level=debug msg="create steps" answer_us=`+strconv.Itoa(100*i)+` container=c forward_us=`+strconv.Itoa(1000*i)+` point_us=0 prepare_record_us=`+strconv.Itoa(200*i)+` total_us=`+strconv.Itoa(1300*i)+` via=nri`,
			`time="x" level=info msg="container joins the target's namespace" via=nri`)
	}
	lines = append(lines, `time="x" level=debug msg="create steps" answer_us=0 forward_us=5000 point_us=3000 prepare_record_us=400 total_us=8400 via=update`)
	if err := os.WriteFile(log, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := stepsTable(log, filepath.Join(t.TempDir(), "missing.log"))
	for _, want := range []string{
		"| nri | 10 | 200µs / 1.2ms / 2ms | 1ms / 6ms / 10ms | 100µs / 600µs / 1ms | 0s / 0s / 0s | 1.3ms / 7.8ms / 13ms |",
		"| update | 1 | 400µs / 400µs / 400µs | 5ms / 5ms / 5ms | 0s / 0s / 0s | 3ms / 3ms / 3ms | 8.4ms / 8.4ms / 8.4ms |",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("table lacks %q:\n%s", want, got)
		}
	}
}
