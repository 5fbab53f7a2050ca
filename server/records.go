package server

import (
	"context"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// records is the one owner of the containers' records: a container's
// record is its annotation in the spec containerd stores, which containerd
// updates whole, with no version (containerdAPI.EditSpec: a Get, then an
// Update). Every write of a record goes through edit, an update function
// as containerd's own metadata store takes them, and every read through
// read; both hold the container's turn, so that writes of one container
// (its create's, its start's, its check's, its target's exit's) follow one
// another and a read sees the last write. Containers' turns are apart: one
// container's write never waits for another's.
//
// What is known in memory of the records (the exit watch's targets) is
// rebuilt from them by the catch-up after each subscription to
// containerd's events, the shim's start among them (after_catchup.go).
type records struct {
	store specEditor

	// mu guards turns; a leaf, never held across a call to containerd.
	mu    sync.Mutex
	turns map[string]*turn // by container, while some edit or read holds or waits for it
}

// turn is one container's: a token (ch holds it while taken), and how
// many hold or wait for it.
type turn struct {
	ch      chan struct{}
	waiters int
}

func newRecords(store specEditor) *records {
	return &records{store: store, turns: map[string]*turn{}}
}

// edit writes container id's record (and what of its spec goes with it,
// as the start's fallback's namespace path), through fn, once every write
// of id before it is done.
func (r *records) edit(ctx context.Context, id string, fn func(*specs.Spec) ([]oci.Opt, error)) error {
	done, err := r.take(ctx, id)
	if err != nil {
		return err
	}
	defer done()
	return r.store.EditSpec(ctx, id, fn)
}

// read is container id's spec with its record, as the last write left it.
func (r *records) read(ctx context.Context, id string) (*specs.Spec, error) {
	done, err := r.take(ctx, id)
	if err != nil {
		return nil, err
	}
	defer done()
	return r.store.Spec(ctx, id)
}

// take waits for container id's turn, or for ctx; done gives it back.
func (r *records) take(ctx context.Context, id string) (done func(), err error) {
	r.mu.Lock()
	tn := r.turns[id]
	if tn == nil {
		tn = &turn{ch: make(chan struct{}, 1)}
		r.turns[id] = tn
	}
	tn.waiters++
	r.mu.Unlock()
	select {
	case tn.ch <- struct{}{}:
		return func() { <-tn.ch; r.leave(id, tn) }, nil
	case <-ctx.Done():
		r.leave(id, tn)
		return nil, ctx.Err()
	}
}

// leave drops a holder or waiter of tn, and the turn with the last.
func (r *records) leave(id string, tn *turn) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if tn.waiters--; tn.waiters == 0 {
		delete(r.turns, id)
	}
}
