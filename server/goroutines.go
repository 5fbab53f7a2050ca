package server

import "sync"

// goroutines are the server's own, each living as long as the server's
// lifetime: the side queue's, the reader of containerd's events, the NRI
// connection's and the reconciler's loop. Shutdown ends the lifetime, then
// waits for them (wait); once it waits, none is started any more.
type goroutines struct {
	mu     sync.Mutex // guards closed, and orders each Add before wait's Wait
	closed bool
	wg     sync.WaitGroup
}

// start runs fn on a goroutine of its own, unless wait has begun: then it
// returns false, and fn does not run.
func (g *goroutines) start(fn func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		fn()
	}()
	return true
}

// wait refuses any start from now on, and waits for the goroutines started.
func (g *goroutines) wait() {
	g.mu.Lock()
	g.closed = true
	g.mu.Unlock()
	g.wg.Wait()
}
