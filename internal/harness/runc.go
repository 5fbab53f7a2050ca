package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// runcDeleteTimeout bounds one "runc delete --force".
const runcDeleteTimeout = 10 * time.Second

// runcRoot is the runc state root the config gives the runc shim; the shim
// keeps each containerd namespace in a subdirectory.
func runcRoot(dir string) string { return filepath.Join(dir, "runc") }

// deleteRuncContainers force-deletes, with the runc binary runc, every
// container still in the runc root below dir: those whose shim was killed or
// never told to delete them. runc kills their processes and removes their
// cgroups, which killing the shim alone would leave behind.
func deleteRuncContainers(dir, runc string) error {
	namespaces, err := os.ReadDir(runcRoot(dir))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list runc root: %w", err)
	}
	var errs []error
	for _, ns := range namespaces {
		root := filepath.Join(runcRoot(dir), ns.Name())
		ids, err := os.ReadDir(root)
		if err != nil {
			errs = append(errs, fmt.Errorf("list runc root %s: %w", root, err))
			continue
		}
		for _, id := range ids {
			errs = append(errs, runcDelete(runc, root, id.Name()))
		}
	}
	return errors.Join(errs...)
}

func runcDelete(runc, root, id string) error {
	ctx, cancel := context.WithTimeout(context.Background(), runcDeleteTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, runc, "--root", root, "delete", "--force", id).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s delete --force %s: %w: %s", runc, id, err, out)
	}
	return nil
}
