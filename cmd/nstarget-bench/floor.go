package main

import (
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
)

// startSplice serves a unix socket in dir that copies bytes to and from the
// backend endpoint, one backend connection per client connection, without
// looking at them: the least any proxy in front of containerd can cost on
// this machine (-floor).
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
