package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Result is how a command ended in the guest.
type Result struct {
	Stdout, Stderr []byte
	Code           int // exit status; 128+N when killed by signal N
}

// Run runs script with /bin/sh -c in the guest, as root, and returns how it
// ended; a non-zero exit status is not an error. The agent kills it at
// ctx's deadline. Requests go one at a time.
//
// A request that meets the guest going down (a reboot, a poweroff) may get
// no reply: the agent it reached is stopped first. Run then waits until ctx
// ends; across a reboot, ask with short deadlines until the answer comes
// from the new boot (/proc/sys/kernel/random/boot_id), since the first may
// still come from the old one.
func (v *VM) Run(ctx context.Context, script string) (Result, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.lastID++
	req := request{ID: v.lastID, Script: script}
	if dl, ok := ctx.Deadline(); ok {
		req.TimeoutMS = max(time.Until(dl).Milliseconds(), 1)
	}
	b, err := json.Marshal(req)
	if err != nil {
		return Result{}, fmt.Errorf("encode request: %w", err)
	}

	// ctx's end interrupts the write or read below; the deadline is cleared
	// only after the watcher is done, so it cannot reach the next request.
	done, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case <-ctx.Done():
			_ = v.port.SetDeadline(time.Now())
		case <-done:
		}
	}()
	defer func() {
		close(done)
		<-watched
		_ = v.port.SetDeadline(time.Time{})
	}()

	if _, err := v.port.Write(append(b, '\n')); err != nil {
		return Result{}, fmt.Errorf("send %q: %w", script, orCtx(ctx, err))
	}
	for {
		line, err := v.rd.ReadBytes('\n')
		if err != nil {
			return Result{}, fmt.Errorf("wait for %q: %w", script, orCtx(ctx, err))
		}
		var rep reply
		if json.Unmarshal(line, &rep) != nil || rep.ID != req.ID {
			continue // a reply to a request given up on, or noise
		}
		res := Result{Stdout: rep.Stdout, Stderr: rep.Stderr, Code: rep.Code}
		if rep.TimedOut { // ctx's deadline, met first by the agent's clock
			return res, fmt.Errorf("run %q: %s: %w", script, rep.Error, context.DeadlineExceeded)
		}
		if rep.Error != "" {
			return res, fmt.Errorf("run %q: %s", script, rep.Error)
		}
		return res, nil
	}
}

// orCtx prefers ctx's error to the I/O error it caused.
func orCtx(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}

// Output runs script and returns its stdout without the trailing newline; a
// non-zero exit status is an error that carries its stderr.
func (v *VM) Output(ctx context.Context, script string) (string, error) {
	res, err := v.Run(ctx, script)
	if err != nil {
		return "", err
	}
	if res.Code != 0 {
		return "", fmt.Errorf("%q: exit status %d: %s", script, res.Code, bytes.TrimSpace(res.Stderr))
	}
	return strings.TrimSuffix(string(res.Stdout), "\n"), nil
}

// WaitRunning waits until systemd has finished starting the guest and
// returns its state; unless that is "running", the error says which units
// failed.
func (v *VM) WaitRunning(ctx context.Context) (string, error) {
	res, err := v.Run(ctx, "systemctl is-system-running --wait")
	if err != nil {
		return "", err
	}
	state := strings.TrimSpace(string(res.Stdout))
	if state == "running" {
		return state, nil
	}
	failed, err := v.Output(ctx, "systemctl --failed --no-legend --plain")
	if err != nil {
		return state, fmt.Errorf("system %s; list failed units: %w", state, err)
	}
	return state, errors.New("system " + state + "; failed units:\n" + failed)
}
