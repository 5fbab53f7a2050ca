package server

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// fallbackAge is how long a client connection stays on the grpc.Server when
// the backend could not be reached as it connected.
const fallbackAge = 30 * time.Second

// backendDialTimeout bounds opening the backend connection for a client.
const backendDialTimeout = 2 * time.Second

// connSet is the client connections of a Server.
type connSet struct {
	dial     func(ctx context.Context) (net.Conn, error)
	mu       sync.Mutex
	lis      net.Listener
	fallback *connListener
	relays   map[*relayConn]bool
	grpcs    int // client connections the grpc.Server serves from this listener
	stopping bool
	wg       sync.WaitGroup
}

// ConnCounts is the client connections open now, by how they are served:
// "relayed" and "grpc" (metrics).
func (s *Server) ConnCounts() map[string]int {
	cs := &s.conns
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return map[string]int{"relayed": len(cs.relays), "grpc": cs.grpcs}
}

// Serve serves CRI on lis until Shutdown: each client connection relayed to
// a backend connection of its own (Options.Dial), or served by the shim's
// grpc.Server when there is no Dial or the backend cannot be reached.
func (s *Server) Serve(lis net.Listener) error {
	cs := &s.conns
	if cs.dial == nil {
		return s.grpc.Serve(lis)
	}
	cs.mu.Lock()
	if cs.stopping {
		cs.mu.Unlock()
		return nil
	}
	cs.lis = lis
	cs.fallback = newConnListener(lis.Addr())
	cs.relays = map[*relayConn]bool{}
	cs.mu.Unlock()
	go s.grpc.Serve(cs.fallback)
	for delay := time.Duration(0); ; {
		conn, err := lis.Accept()
		if err != nil {
			cs.mu.Lock()
			stopping := cs.stopping
			cs.mu.Unlock()
			if stopping {
				return nil
			}
			var te interface{ Temporary() bool }
			if errors.As(err, &te) && te.Temporary() { // e.g. out of fds: keep serving the others
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				s.log.WithError(err).Warn("accept; retrying")
				time.Sleep(delay)
				continue
			}
			return err
		}
		delay = 0
		cs.wg.Add(1)
		go func() { defer cs.wg.Done(); s.serveConn(conn) }()
	}
}

func (s *Server) serveConn(conn net.Conn) {
	cs := &s.conns
	ctx, cancel := context.WithTimeout(context.Background(), backendDialTimeout)
	b, err := cs.dial(ctx)
	cancel()
	if err != nil {
		s.log.WithError(err).Debug("backend unreachable: this client connection is served by the shim's grpc server")
		cs.mu.Lock()
		cs.grpcs++
		cs.mu.Unlock()
		cs.fallback.put(&countedConn{Conn: conn, closed: func() {
			cs.mu.Lock()
			cs.grpcs--
			cs.mu.Unlock()
		}})
		return
	}
	rc := newRelayConn(s, conn, b)
	cs.mu.Lock()
	if cs.stopping {
		cs.mu.Unlock()
		rc.close()
		return
	}
	cs.relays[rc] = true
	cs.mu.Unlock()
	rc.serve()
	cs.mu.Lock()
	delete(cs.relays, rc)
	cs.mu.Unlock()
}

// Shutdown stops accepting connections and calls, lets those in flight
// finish up to ctx's deadline, then cuts the rest.
func (s *Server) Shutdown(ctx context.Context) {
	cs := &s.conns
	cs.mu.Lock()
	cs.stopping = true
	if cs.lis != nil {
		cs.lis.Close()
	}
	var drained []<-chan struct{}
	for rc := range cs.relays {
		drained = append(drained, rc.drain())
	}
	cs.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.grpc.GracefulStop()
		for _, d := range drained {
			<-d
		}
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		s.grpc.Stop()
	}
	cs.mu.Lock()
	for rc := range cs.relays {
		rc.close()
	}
	cs.mu.Unlock()
	if cs.dial != nil {
		cs.wg.Wait()
	}
	<-done
}

// countedConn calls closed once, on its first Close.
type countedConn struct {
	net.Conn
	once   sync.Once
	closed func()
}

func (c *countedConn) Close() error {
	c.once.Do(c.closed)
	return c.Conn.Close()
}

// connListener hands connections accepted elsewhere to a grpc.Server.
type connListener struct {
	addr   net.Addr
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newConnListener(addr net.Addr) *connListener {
	return &connListener{addr: addr, conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *connListener) put(c net.Conn) {
	select {
	case l.conns <- c:
	case <-l.closed:
		c.Close()
	}
}

func (l *connListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}

func (l *connListener) Close() error {
	l.once.Do(func() { close(l.closed) })
	return nil
}

func (l *connListener) Addr() net.Addr { return l.addr }
