package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// rendezvous holds each caller until n have come, or until wait has passed
// since the first: writers whose reads all come before their writes, when
// nothing serializes them.
type rendezvous struct {
	mu   sync.Mutex
	n    int
	wait time.Duration
	all  chan struct{}
}

func newRendezvous(n int, wait time.Duration) *rendezvous {
	return &rendezvous{n: n, wait: wait, all: make(chan struct{})}
}

func (r *rendezvous) arrive(string) {
	r.mu.Lock()
	r.n--
	if r.n == 0 {
		close(r.all)
	}
	r.mu.Unlock()
	select {
	case <-r.all:
	case <-time.After(r.wait):
	}
}

// The writers of one container's record racing, as they can: its start
// falling back (on the start's call), the check after its start and its
// target's exit (on the side queue), each reading the record and writing
// it whole through a store that, as containerd's, has no version. Each
// pair's writes are both in the record after: none is lost. (The start and
// the check are not paired: a check that reads the start's fallback has
// nothing to check.)
func TestRecordWritersRace(t *testing.T) {
	for _, tc := range []struct {
		desc    string
		writers []string
	}{
		{"the start and the target's exit", []string{"start", "exit"}},
		{"the check and the target's exit", []string{"check", "exit"}},
		{"the start, the exit, and the exit again (a catch-up)", []string{"start", "exit", "exit"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			r, _, _, s := withChecks(t, newRig, false)
			id := r.pidDebugger(t)
			r.specs.between = newRendezvous(len(tc.writers), 300*time.Millisecond).arrive
			var wg sync.WaitGroup
			for _, w := range tc.writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r.write(t, w, id)
				}()
			}
			wg.Wait()
			rec := r.record(t, id)
			pid := rec.Namespaces[string(namespaces.PID)]
			for _, w := range tc.writers {
				switch {
				case w == "start" && pid.Result != oci.Fallback:
					t.Errorf("the start's fallback lost: pid namespace %+v", pid)
				case w == "check" && pid.Verify == nil:
					t.Errorf("the check's verification lost: pid namespace %+v", pid)
				case w == "exit" && rec.TargetExited == nil:
					t.Error("the exit's targetExited lost")
				}
			}
			exited := 0
			for _, e := range s.posted() {
				if e.Reason == eventTargetExited {
					exited++
				}
			}
			if exited != 1 {
				t.Errorf("posted %d TargetExited, want 1", exited)
			}
		})
	}
}

// write is one writer of container id's record: the start's fallback, the
// check after the start, or the target's exit.
func (r *rig) write(t *testing.T, w, id string) {
	tg, after, ctx := r.server.target, r.server.after, context.Background()
	switch w {
	case "start": // the target's PID namespace has no init left
		if err := tg.initLost(ctx, id, nil); err != nil {
			t.Errorf("start: %v", err)
		}
	case "check":
		read := &taskRead{pid: 777, ids: map[namespaces.Kind]namespaces.ID{namespaces.PID: targetPID}, at: time.Now()}
		after.verify.report(ctx, id, read, taskWord{pid: 777})
	case "exit":
		after.exits.tell(ctx, id, taskExit{container: "app1", process: "app1", status: 3, at: time.Now()})
	}
}
