package nriplugin

import (
	"context"
	"sync"
)

// registrationGate keeps the shim's NRI registrations and the
// RemovePodSandbox calls it forwards out of each other's way.
//
// containerd (2.x, NRI v0.12) holds a read lock that blocks plugin
// synchronization for the whole of each CRI lifecycle call, and
// RemovePodSandbox takes it a second time in the RemoveContainer it calls
// for each container of the pod. A plugin that registers asks for the lock
// for writing once containerd has configured it. If that happens while a
// RemovePodSandbox holds the outer read, the inner read waits behind the
// writer and the writer behind the outer read: containerd's CRI hangs until
// containerd is restarted (a sync.RWMutex refuses new readers once a writer
// waits). The shim registers at start-up and after every containerd
// restart, so it must never do so while a RemovePodSandbox it forwarded is
// in containerd, nor forward one until containerd has synchronized it (then
// containerd holds the write lock, or has released it).
//
// A registration waits for the removals in the backend to finish; removals
// that arrive meanwhile still go ahead, so a registration never delays
// kubelet's calls, only the other way round (by the length of a
// registration, milliseconds). The zero value is ready to use.
type registrationGate struct {
	// mu guards the fields below; a leaf (then, in waitUntil, takes no lock).
	mu       sync.Mutex
	removals int    // RemovePodSandbox calls in the backend
	reg      uint64 // the registration in progress, 0 for none
	next     uint64
	changed  chan struct{} // closed and replaced at every change
}

// waitUntil waits until ok holds, then runs then; both under g.mu.
func (g *registrationGate) waitUntil(ctx context.Context, ok func() bool, then func()) error {
	for {
		g.mu.Lock()
		if ok() {
			then()
			g.mu.Unlock()
			return nil
		}
		if g.changed == nil {
			g.changed = make(chan struct{})
		}
		ch := g.changed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// signal wakes the waiters; the caller holds g.mu.
func (g *registrationGate) signal() {
	if g.changed != nil {
		close(g.changed)
		g.changed = nil
	}
}

// removal waits until no registration is in progress and counts a
// RemovePodSandbox in; done counts it out once the backend has answered.
func (g *registrationGate) removal(ctx context.Context) (done func(), err error) {
	if err := g.waitUntil(ctx, func() bool { return g.reg == 0 }, func() { g.removals++ }); err != nil {
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			g.mu.Lock()
			g.removals--
			g.signal()
			g.mu.Unlock()
		})
	}, nil
}

// registration waits until no RemovePodSandbox is in the backend and marks
// a registration in progress; done ends it, once the runtime has
// synchronized the plugin or the attempt has failed. A done of an earlier
// registration does not end a later one.
func (g *registrationGate) registration(ctx context.Context) (done func(), err error) {
	if breakRegistrationGate {
		return func() {}, nil
	}
	var id uint64
	if err := g.waitUntil(ctx, func() bool { return g.removals == 0 && g.reg == 0 },
		func() { g.next++; id = g.next; g.reg = id }); err != nil {
		return nil, err
	}
	return func() {
		g.mu.Lock()
		if g.reg == id {
			g.reg = 0
			g.signal()
		}
		g.mu.Unlock()
	}, nil
}
