package soak

import (
	"os"
	"path/filepath"
	"testing"
)

func TestFirstLine(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct{ desc, log, want string }{
		{"stdout first", "2026-11-27T09:00:00.1Z stdout F pid:[4026532]\n2026-11-27T09:00:00.2Z stdout F PID ARGS\n", "pid:[4026532]"},
		{"stderr skipped", "2026-11-27T09:00:00.1Z stderr F oops\n2026-11-27T09:00:00.2Z stdout F pid:[7]\n", "pid:[7]"},
		{"empty", "", ""},
		{"not a CRI log line", "pid:[7]\n", ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			p := filepath.Join(dir, "0.log")
			if err := os.WriteFile(p, []byte(tc.log), 0o600); err != nil {
				t.Fatal(err)
			}
			if got := firstLine(p); got != tc.want {
				t.Errorf("firstLine = %q, want %q", got, tc.want)
			}
		})
	}
	if got := firstLine(filepath.Join(dir, "missing.log")); got != "" {
		t.Errorf("firstLine of a missing file = %q", got)
	}
}
