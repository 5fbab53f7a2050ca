package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"
)

const (
	// poweroffTimeout bounds the request that asks the guest to power off
	// (the agent answers before the guest goes down).
	poweroffTimeout = 30 * time.Second
	// unansweredGrace is how long qemu may take to exit when that request
	// went unanswered: the agent may have been stopped before its reply, or
	// be gone.
	unansweredGrace = 15 * time.Second
)

// Stop powers the guest off and waits for qemu to exit; at ctx's end it
// kills qemu by its PID, and says so. Either way it closes the port and
// removes the run directory.
func (v *VM) Stop(ctx context.Context) error {
	defer os.RemoveAll(v.dir)
	defer func() {
		v.mu.Lock()
		v.port.Close()
		v.mu.Unlock()
	}()
	select {
	case <-v.exited:
		return errors.New("qemu had already exited" + v.logs())
	default:
	}

	askCtx, cancel := context.WithTimeout(ctx, poweroffTimeout)
	_, askErr := v.Run(askCtx, "systemctl poweroff --no-block")
	cancel()
	wait := ctx
	if askErr != nil {
		var cancel context.CancelFunc
		wait, cancel = context.WithTimeout(ctx, unansweredGrace)
		defer cancel()
	}
	select {
	case <-v.exited:
		return nil
	case <-wait.Done():
		v.kill()
		return fmt.Errorf("qemu still running after the guest was asked to power off (%w): killed%s",
			errors.Join(askErr, wait.Err()), v.logs())
	}
}
