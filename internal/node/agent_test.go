package node

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// socketPair is a connected pair of stream sockets: buffered both ways, as
// qemu's socket and the virtio-serial port are.
func socketPair(t *testing.T) (host, guest net.Conn) {
	t.Helper()
	fds, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	conns := make([]net.Conn, 2)
	for i, fd := range fds {
		f := os.NewFile(uintptr(fd), "socketpair")
		c, err := net.FileConn(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
	}
	return conns[0], conns[1]
}

// servedVM is a VM whose port is served by Serve in this process: the
// protocol both ways, without qemu.
func servedVM(t *testing.T) (*VM, net.Conn) {
	host, guest := socketPair(t)
	served := make(chan error, 1)
	go func() { served <- Serve(guest) }()
	t.Cleanup(func() {
		host.Close()
		if err := <-served; !errors.Is(err, io.EOF) {
			t.Errorf("Serve ended with %v, want EOF", err)
		}
	})
	return &VM{port: host, rd: bufio.NewReader(host)}, host
}

func TestRunServe(t *testing.T) {
	vm, _ := servedVM(t)
	for _, tc := range []struct {
		desc, script   string
		stdout, stderr string
		code           int
	}{
		{desc: "output and status", script: "echo out; echo err >&2; exit 7", stdout: "out\n", stderr: "err\n", code: 7},
		{desc: "success", script: "printf 'a\\000b'", stdout: "a\x00b"},
		{desc: "killed by a signal", script: "kill -9 $$", code: 128 + 9},
		{desc: "stdin is empty", script: "cat", code: 0},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			res, err := vm.Run(context.Background(), tc.script)
			if err != nil {
				t.Fatal(err)
			}
			if string(res.Stdout) != tc.stdout || string(res.Stderr) != tc.stderr || res.Code != tc.code {
				t.Errorf("got stdout %q stderr %q code %d, want %q %q %d", res.Stdout, res.Stderr, res.Code, tc.stdout, tc.stderr, tc.code)
			}
		})
	}
}

// A request the host gives up on is killed by the agent at the same
// deadline; its late reply is skipped, as is a line that is not JSON.
func TestRunGivenUp(t *testing.T) {
	vm, host := servedVM(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := vm.Run(ctx, "sleep 5"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run past its deadline: %v, want %v", err, context.DeadlineExceeded)
	}
	if _, err := host.Write([]byte("not json\n")); err != nil {
		t.Fatal(err)
	}
	out, err := vm.Output(context.Background(), "echo next")
	if err != nil || out != "next" {
		t.Fatalf("the next request: %q, %v; want next", out, err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the agent waited %v: the command outlived its timeout", d)
	}
}

// The agent's timer starts after the host's, but may fire first on a busy
// machine: its reply then arrives before ctx ends, and still means ctx's
// deadline.
func TestRunAgentTimedOutFirst(t *testing.T) {
	host, guest := socketPair(t)
	go func() {
		line, _ := bufio.NewReader(guest).ReadBytes('\n')
		var req request
		if json.Unmarshal(line, &req) == nil {
			b, _ := json.Marshal(reply{ID: req.ID, Code: 137, Error: "timed out after 1h0m0s", TimedOut: true})
			guest.Write(append(b, '\n'))
		}
	}()
	vm := &VM{port: host, rd: bufio.NewReader(host)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	res, err := vm.Run(ctx, "sleep 5")
	if !errors.Is(err, context.DeadlineExceeded) || res.Code != 137 {
		t.Fatalf("Run = %+v, %v; want code 137 and %v", res, err, context.DeadlineExceeded)
	}
}

func TestOutput(t *testing.T) {
	vm, _ := servedVM(t)
	if _, err := vm.Output(context.Background(), "echo why >&2; exit 2"); err == nil || !strings.Contains(err.Error(), "exit status 2: why") {
		t.Errorf("Output of a failing command: %v, want its status and stderr", err)
	}
}
