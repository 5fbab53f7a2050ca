package main

import (
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// startSpliceProcess runs the splice in a process of its own (this program,
// "splice" argument), as the shim is: a splice inside the bench's own process
// would share its scheduler and look cheaper than any separate proxy can be.
func startSpliceProcess(dir, backend string) (endpoint string, pid int, stop func(), err error) {
	self, err := os.Executable()
	if err != nil {
		return "", 0, nil, err
	}
	cmd := exec.Command(self, "splice", dir, backend)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		return "", 0, nil, err
	}
	stop = func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	}
	sock := filepath.Join(dir, "splice.sock")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", sock); err == nil {
			c.Close()
			return "unix://" + sock, cmd.Process.Pid, stop, nil
		}
		if time.Now().After(deadline) {
			stop()
			return "", 0, nil, fmt.Errorf("splice process not serving on %s", sock)
		}
	}
}

// spliceMain is the "splice DIR BACKEND" process: it serves until SIGTERM.
func spliceMain(args []string) {
	if len(args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: nstarget-bench splice DIR BACKEND")
		os.Exit(2)
	}
	_, stop, err := startSplice(args[0], args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "splice:", err)
		os.Exit(1)
	}
	sig := make(chan os.Signal, 1)
	signalNotify(sig)
	<-sig
	stop()
}

// startSplice serves a unix socket in dir that copies bytes to and from the
// backend endpoint, one backend connection per client connection, without
// looking at them: the least any proxy in front of containerd can cost on
// this machine, the third side of the latency and throughput measures.
func startSplice(dir, backend string) (endpoint string, stop func(), err error) {
	path := filepath.Join(dir, "splice.sock")
	lis, err := net.Listen("unix", path)
	if err != nil {
		return "", nil, err
	}
	target := strings.TrimPrefix(backend, "unix://")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	track := func(c net.Conn) { mu.Lock(); conns = append(conns, c); mu.Unlock() }
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("unix", target)
			if err != nil {
				c.Close()
				continue
			}
			track(c)
			track(b)
			wg.Add(2)
			go func() { defer wg.Done(); io.Copy(b, c); b.Close() }()
			go func() { defer wg.Done(); io.Copy(c, b); c.Close() }()
		}
	}()
	return "unix://" + path, func() {
		lis.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	}, nil
}
