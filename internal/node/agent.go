package node

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// pipeGrace is how long a finished command's pipes may stay open (held by
// a process it left in the background) before the agent stops reading them.
const pipeGrace = 2 * time.Second

// Serve is the agent's loop, in the guest: it reads requests from port, runs
// each in turn and writes its reply. It returns the read error that ends the
// stream (io.EOF while the host side of a virtio-serial port is not
// connected: the caller retries) or the first write error.
func Serve(port io.ReadWriter) error {
	rd := bufio.NewReader(port)
	for {
		line, err := rd.ReadBytes('\n')
		if err != nil {
			return err
		}
		var req request
		if json.Unmarshal(line, &req) != nil || req.ID == 0 {
			continue // noise, e.g. the rest of a line from before a reconnect
		}
		b, err := json.Marshal(runScript(req))
		if err != nil {
			return fmt.Errorf("encode reply %d: %w", req.ID, err)
		}
		if _, err := port.Write(append(b, '\n')); err != nil {
			return fmt.Errorf("write reply %d: %w", req.ID, err)
		}
	}
}

// runScript runs one request with /bin/sh -c in a process group of its own,
// killed whole at the request's timeout.
func runScript(req request) reply {
	ctx := context.Background()
	if req.TimeoutMS > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(req.TimeoutMS)*time.Millisecond)
		defer cancel()
	}
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", req.Script)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = pipeGrace
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	rep := reply{ID: req.ID, Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Code: -1}
	if cmd.ProcessState != nil {
		rep.Code = exitCode(cmd.ProcessState)
	}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		rep.Error = fmt.Sprintf("timed out after %v", time.Duration(req.TimeoutMS)*time.Millisecond)
		rep.TimedOut = true
	case err == nil, errors.As(err, &exit), errors.Is(err, exec.ErrWaitDelay):
		// It ran; its status says how it ended.
	case cmd.ProcessState == nil:
		// it never ran: what the agent sees of the paths its exec needs
		rep.Error = err.Error() + "\n" + diagnose()
	default:
		rep.Error = err.Error()
	}
	return rep
}

// exitCode is the status as a shell gives it: 128+N when killed by signal N.
func exitCode(ps *os.ProcessState) int {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return ps.ExitCode()
}
