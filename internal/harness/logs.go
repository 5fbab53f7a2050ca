package harness

import (
	"os"
	"path/filepath"
)

// KeepLogs copies the components' logs, dir/*/*.log (each component writes
// its log in a directory of its own under a run's directory), into dst,
// made if need be, before the run's directory is removed. A log that cannot
// be read or written is passed over; only dst that cannot be made is an
// error.
func KeepLogs(dir, dst string) error {
	logs, _ := filepath.Glob(filepath.Join(dir, "*", "*.log"))
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil {
			_ = os.WriteFile(filepath.Join(dst, filepath.Base(l)), b, 0o644)
		}
	}
	return nil
}
