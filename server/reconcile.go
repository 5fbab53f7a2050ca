package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/intents"
)

// lateStepsTimeout bounds the steps of a TARGET create after the backend
// made the container (pid confirmation, spec, pins, clean-up), which do not
// depend on the caller's context.
const lateStepsTimeout = 30 * time.Second

// reconcileRetry is how often records left by a failed clean-up are retried.
const reconcileRetry = 2 * time.Second

// intentStore is where intent records live (intents.Dir on disk).
type intentStore interface {
	Put(in intents.Record) error
	Remove(id string) error
	List() ([]intents.Record, error)
}

// flights is the records of creates in flight in this process, which the
// reconciler must leave alone, and whether a reconciler loop runs.
// Lock order: targeter.reconcileMu, then flights.mu (a leaf).
type flights struct {
	// mu guards ids and looping.
	mu      sync.Mutex
	ids     map[string]bool
	looping bool
}

func (f *flights) add(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ids == nil {
		f.ids = map[string]bool{}
	}
	f.ids[id] = true
}

func (f *flights) done(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.ids, id)
}

func (f *flights) has(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ids[id]
}

// begin records in before the create is forwarded.
func (t *targeter) begin(in intents.Record) error {
	t.flights.add(in.ID)
	if err := t.intents.Put(in); err != nil {
		t.flights.done(in.ID)
		return preconditionf("container %q: write the intent record under the state dir: %w", in.Name, err)
	}
	return nil
}

// end closes the record of a create that is about to answer: removed, or,
// when kept, left for the reconciler, which is started.
func (t *targeter) end(id string, kept bool) {
	if !kept {
		if err := t.intents.Remove(id); err != nil {
			t.log.WithError(err).Warn("remove intent record; the next reconcile removes it")
		}
	}
	t.flights.done(id)
	if kept {
		t.reconcileSoon()
	}
}

// discard removes a container the shim will not keep, and its pins, and
// reports whether that is done. When it is not (containerd down), the record
// in, marked for discarding, stays for the reconciler.
func (t *targeter) discard(ctx context.Context, in intents.Record) bool {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
	defer cancel()
	err := t.undo(ctx, in)
	if err == nil {
		return true
	}
	in.Discard = true
	if perr := t.intents.Put(in); perr != nil {
		t.log.WithError(errors.Join(err, perr)).WithField("container", in.Container).
			Error("remove the container after a failed create or start, and record it for later; it is left in the backend")
		return true // no record to keep
	}
	t.log.WithError(err).WithField("container", in.Container).
		Warn("remove the container after a failed create or start; recorded, retried until containerd answers")
	return false
}

// discardID is discard for a container made by an earlier call.
func (t *targeter) discardID(ctx context.Context, id string) {
	in := intents.Record{ID: intents.NewID(), Container: id}
	if !t.discard(ctx, in) {
		t.reconcileSoon()
	}
}

// undo removes whatever the backend has made for in, and its pins: the
// container with in's id, or, when the backend never answered with one,
// those of in's sandbox with in's name and attempt.
func (t *targeter) undo(ctx context.Context, in intents.Record) error {
	ids := []string{in.Container}
	if in.Container == "" {
		resp, err := t.cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: in.Sandbox}})
		if err != nil {
			return fmt.Errorf("find container %q (attempt %d) in pod sandbox %q: %w", in.Name, in.Attempt, in.Sandbox, err)
		}
		ids = ids[:0]
		for _, c := range resp.GetContainers() {
			if c.GetPodSandboxId() == in.Sandbox && c.GetMetadata().GetName() == in.Name && c.GetMetadata().GetAttempt() == in.Attempt {
				ids = append(ids, c.GetId())
			}
		}
	}
	for _, id := range ids {
		if _, err := t.cri.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil && status.Code(err) != codes.NotFound {
			return fmt.Errorf("remove container %s: %w", id, err)
		}
		if err := t.pins.Release(id); err != nil {
			return err
		}
	}
	return nil
}

// reconcile undoes what every record left by a crash, or by a clean-up that
// failed, names, and removes the records. Records of creates in flight in
// this process are left alone. One record that cannot be reconciled does
// not stop the others.
func (t *targeter) reconcile(ctx context.Context) error {
	t.reconcileMu.Lock()
	defer t.reconcileMu.Unlock()
	records, err := t.intents.List()
	errs := []error{err}
	for _, in := range records {
		if t.flights.has(in.ID) {
			continue
		}
		log := t.log.WithFields(map[string]any{"record": in.ID, "name": in.Name, "attempt": in.Attempt, "sandbox": in.Sandbox, "container": in.Container})
		if err := t.undo(ctx, in); err != nil {
			log.WithError(err).Warn("reconcile: the container of an unfinished create is not removed yet")
			errs = append(errs, err)
			continue
		}
		if err := t.intents.Remove(in.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		log.Info("reconcile: removed what an unfinished create left (its client never received the container id)")
	}
	return errors.Join(errs...)
}

// reconcileSoon starts a reconciler loop unless one runs: it retries
// reconcileAll until it succeeds (no record left but those of creates in
// flight, no stale pin), or the targeter stops.
func (t *targeter) reconcileSoon() {
	t.flights.mu.Lock()
	if t.flights.looping {
		t.flights.mu.Unlock()
		return
	}
	t.flights.looping = true
	t.flights.mu.Unlock()
	go func() {
		defer func() {
			t.flights.mu.Lock()
			t.flights.looping = false
			t.flights.mu.Unlock()
		}()
		for {
			ctx, cancel := context.WithTimeout(t.life, discardTimeout)
			err := t.reconcileAll(ctx)
			cancel()
			if err == nil {
				return
			}
			select {
			case <-t.life.Done():
				return
			case <-time.After(reconcileRetry):
			}
		}
	}()
}

// reconcileAll undoes what unfinished creates left, then releases the pins
// of containers the backend no longer has.
func (t *targeter) reconcileAll(ctx context.Context) error {
	return errors.Join(t.reconcile(ctx), t.releaseStale(ctx))
}

// Reconcile undoes what unfinished creates left (a crash, a clean-up that
// failed), then releases the pins of containers the backend no longer has.
// When that fails (containerd down), it is retried in the background until
// it succeeds; the error says why the first attempt did not.
func (s *Server) Reconcile(ctx context.Context) error {
	err := s.target.reconcileAll(ctx)
	if err != nil {
		s.target.reconcileSoon()
	}
	return err
}
