package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/sirupsen/logrus"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/intents"
)

// lateStepsTimeout bounds the steps of a TARGET create after the backend
// made the container (pid confirmation, spec, pins, clean-up), which do not
// depend on the caller's context.
const lateStepsTimeout = 30 * time.Second

// discardTimeout bounds the clean-up of a container the shim will not keep.
const discardTimeout = 30 * time.Second

// reconcileRetry is how often records left by a failed clean-up are retried.
const reconcileRetry = 2 * time.Second

// intentStore is where intent records live (intents.Dir on disk).
type intentStore interface {
	Put(rec intents.Record) error
	Remove(id string) error
	List() ([]intents.Record, error)
}

// reconciler is crash recovery: the intent records of TARGET creates in
// flight, and the clean-up of what an unfinished create, or one the shim
// would not keep, left in the backend and among the pins. Its state is on
// disk (the records, the pins) and in containerd, but for which records and
// pins belong to creates in flight in this process (flights, pinning),
// which it must leave alone.
type reconciler struct {
	cri     reconcilerCRI
	pins    pinStore
	intents intentStore
	log     *logrus.Entry
	// life is the server's (Server.life): its loop ends with it; bg, the
	// server's goroutines, runs the loop, so that Shutdown waits for it.
	life context.Context
	bg   *goroutines

	// mu: one reconcile at a time, held across its calls to the backend
	// (only reconciles take it, never a call's handler). Lock order: mu,
	// then flights.mu.
	mu      sync.Mutex
	flights flights
	// pinning holds the containers pinned by a create still in flight
	// (createPins): containerd may not list them yet (pinned in their NRI
	// event), and releaseStale must leave their pins alone.
	pinning flights
	// looping: a reconciler loop runs (reconcileSoon).
	looping atomic.Bool
}

func newReconciler(life context.Context, bg *goroutines, cri reconcilerCRI, pins pinStore, records intentStore, log *logrus.Entry) *reconciler {
	return &reconciler{cri: cri, pins: pins, intents: records, log: log, life: life, bg: bg}
}

// flights is a set of ids in flight in this process.
type flights struct {
	// mu guards ids; a leaf.
	mu  sync.Mutex
	ids map[string]bool
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

// flight is one create's intent record, from begin to end, and what the
// backend may hold for it. It belongs to the create's handler, which tells
// it how each forward went (forwarded) and the container made (made); end
// removes the record, or leaves it to the reconciler.
type flight struct {
	r      *reconciler
	record intents.Record // with the container, once made
	// unknown: the backend may have made a container whose id the create
	// does not know (its last forward failed without the backend's answer,
	// or the answer named none); the reconciler finds it by name.
	unknown bool
}

// begin writes rec down before the create is forwarded.
// It is in flight from before the write, so that no reconcile takes it
// for a crashed create's.
func (r *reconciler) begin(rec intents.Record) (_ *flight, retErr error) {
	r.flights.add(rec.ID)
	defer func() {
		if retErr != nil {
			r.flights.done(rec.ID)
		}
	}()
	if err := r.intents.Put(rec); err != nil {
		return nil, preconditionf("container %q: write the intent record under the state dir: %w", rec.Name, err)
	}
	return &flight{r: r, record: rec}, nil
}

// forwarded tells the record how a forward ended (err, nil when the backend
// made a container): an error that is not the backend's own answer leaves
// what it may have made unknown.
func (f *flight) forwarded(err error) { f.unknown = err != nil && !answered(err) }

// made adds to the record the id of the container the backend's answer
// (out) names. An answer without one is an error, and what the backend
// made is unknown: the reconciler finds it by name.
func (f *flight) made(out []byte) (string, error) {
	id, err := criwire.ContainerID(out)
	if err != nil || id == "" {
		f.unknown = true
		return "", fmt.Errorf("container %q: backend CreateContainer answered without a container id (%v)", f.record.Name, err)
	}
	f.record.Container = id
	if err := f.r.intents.Put(f.record); err != nil {
		f.r.log.WithError(err).WithField("container", id).Warn("intent record: the container id could not be added; the reconciler finds it by name")
	}
	return id, nil
}

// end closes the record of a create that answers retErr. A failed create's
// container, when it made one, is removed with its pins; the record is
// then removed, or, while what the backend holds is unknown or could not be
// removed (containerd down), left for the reconciler, which is started.
func (f *flight) end(ctx context.Context, retErr error) {
	r := f.r
	left := f.unknown
	if retErr != nil && f.record.Container != "" {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
		defer cancel()
		if err := r.undo(ctx, f.record); err != nil {
			r.log.WithError(err).WithField("container", f.record.Container).
				Warn("remove the container after a failed create; recorded, retried until containerd answers")
			left = true
		}
	}
	if !left && !breakIntentRemoval {
		if err := r.intents.Remove(f.record.ID); err != nil {
			r.log.WithError(err).Warn("remove intent record; the next reconcile removes it")
		}
	}
	r.flights.done(f.record.ID)
	if left {
		r.reconcileSoon()
	}
}

// answered closes the record of the plugin mode's answer to containerd's
// NRI event: containerd's create goes on, or fails, by itself, and nothing
// is undone here (a refused create leaves nothing in containerd).
func (f *flight) answered() {
	if err := f.r.intents.Remove(f.record.ID); err != nil {
		f.r.log.WithError(err).Warn("remove intent record; the next reconcile removes it")
	}
	f.r.flights.done(f.record.ID)
}

// discardID removes container id, made by an earlier call, which the shim
// will not keep (a failed start), and its pins. When that cannot be done
// now (containerd down), a record naming it is written, and the reconciler
// retries until containerd answers.
func (r *reconciler) discardID(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
	defer cancel()
	rec := intents.Record{ID: intents.NewID(), Container: id}
	err := r.undo(ctx, rec)
	if err == nil {
		return
	}
	if perr := r.intents.Put(rec); perr != nil {
		r.log.WithError(errors.Join(err, perr)).WithField("container", id).
			Error("remove the container after a failed start, and record it for later; it is left in the backend")
		return
	}
	r.log.WithError(err).WithField("container", id).
		Warn("remove the container after a failed start; recorded, retried until containerd answers")
	r.reconcileSoon()
}

// undo removes whatever the backend has made for rec, and its pins: the
// container with rec's id, or, when the backend never answered with one,
// those of rec's sandbox with rec's name and attempt.
func (r *reconciler) undo(ctx context.Context, rec intents.Record) error {
	ids := []string{rec.Container}
	if rec.Container == "" {
		resp, err := r.cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{PodSandboxId: rec.Sandbox}})
		if err != nil {
			return fmt.Errorf("find container %q (attempt %d) in pod sandbox %q: %w", rec.Name, rec.Attempt, rec.Sandbox, err)
		}
		ids = ids[:0]
		for _, c := range resp.GetContainers() {
			if c.GetPodSandboxId() == rec.Sandbox && c.GetMetadata().GetName() == rec.Name && c.GetMetadata().GetAttempt() == rec.Attempt {
				ids = append(ids, c.GetId())
			}
		}
	}
	for _, id := range ids {
		if _, err := r.cri.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil && status.Code(err) != codes.NotFound {
			return fmt.Errorf("remove container %s: %w", id, err)
		}
		if err := r.pins.Release(id); err != nil {
			return err
		}
	}
	return nil
}

// reconcile undoes what unfinished creates left (undoRecorded), then
// releases the pins of containers the backend no longer has (releaseStale).
func (r *reconciler) reconcile(ctx context.Context) error {
	return errors.Join(r.undoRecorded(ctx), r.releaseStale(ctx))
}

// undoRecorded undoes what every record left by a crash, or by a clean-up
// that failed, names, and removes the records. Records of creates in flight
// in this process are left alone. One record that cannot be reconciled does
// not stop the others.
func (r *reconciler) undoRecorded(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	records, err := r.intents.List()
	errs := []error{err}
	for _, rec := range records {
		if r.flights.has(rec.ID) {
			continue
		}
		log := r.log.WithFields(map[string]any{"record": rec.ID, "name": rec.Name, "attempt": rec.Attempt, "sandbox": rec.Sandbox, "container": rec.Container})
		if rec.Plugin {
			// containerd's own create, whose client may hold the
			// container: it stays; its pins go with it (releaseStale)
			errs = append(errs, r.intents.Remove(rec.ID))
			log.Warn("reconcile: cri-nstarget stopped while it answered containerd's NRI event for this container: containerd made it without the answer (with its own TARGET path, unpinned), or not at all")
			continue
		}
		if err := r.undo(ctx, rec); err != nil {
			log.WithError(err).Warn("reconcile: the container of an unfinished create is not removed yet")
			errs = append(errs, err)
			continue
		}
		if err := r.intents.Remove(rec.ID); err != nil {
			errs = append(errs, err)
			continue
		}
		log.Info("reconcile: removed what an unfinished create left (its client never received the container id)")
	}
	return errors.Join(errs...)
}

// reconcileSoon starts a reconciler loop unless one runs: it retries
// reconcile until it succeeds (no record left but those of creates in
// flight, no stale pin), or the server shuts down.
func (r *reconciler) reconcileSoon() {
	if !r.looping.CompareAndSwap(false, true) {
		return
	}
	started := r.bg.start(func() {
		defer r.looping.Store(false)
		for {
			ctx, cancel := context.WithTimeout(r.life, discardTimeout)
			err := r.reconcile(ctx)
			cancel()
			if err == nil {
				return
			}
			select {
			case <-r.life.Done():
				return
			case <-time.After(reconcileRetry):
			}
		}
	})
	if !started { // the server is shutting down
		r.looping.Store(false)
	}
}

// Reconcile undoes what unfinished creates left (a crash, a clean-up that
// failed), then releases the pins of containers the backend no longer has.
// When that fails (containerd down), it is retried in the background until
// it succeeds; the error says why the first attempt did not.
func (s *Server) Reconcile(ctx context.Context) error {
	if err := s.target.handlers.rebuild(ctx); err != nil {
		s.log.WithError(err).Warn("the pods' runtime handlers: learnt again as TARGET creates need them")
	}
	err := s.target.recon.reconcile(ctx)
	if err != nil {
		s.target.recon.reconcileSoon()
	}
	return err
}

// releaseStale releases the pins of containers the backend no longer has.
// The pin list is read before the backend's container list, so a pin made
// for a container created meanwhile is never taken for stale.
func (r *reconciler) releaseStale(ctx context.Context) error {
	ids, err := r.pins.IDs()
	if err != nil || len(ids) == 0 {
		return err
	}
	// Pinned in an NRI event, not listed by the backend until its create
	// returns. Taken before the list: a pin of a create not in flight now is
	// of a container the list below has, or had.
	inFlight := r.inFlight(ids)
	resp, err := r.cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return fmt.Errorf("release stale pins: list backend containers: %w", err)
	}
	live := make(map[string]bool, len(resp.GetContainers()))
	for _, c := range resp.GetContainers() {
		live[c.GetId()] = true
	}
	return r.releaseGone(ids, inFlight, live)
}

// releaseAbsent releases the pins of containers not in live, the containers
// containerd handed the plugin mode at NRI's Synchronize: containerd sends it
// holding its plugin-sync lock for writing, so no create of it is pinning
// now; only those in flight in this process are left alone.
func (r *reconciler) releaseAbsent(live map[string]bool) error {
	ids, err := r.pins.IDs()
	if err != nil || len(ids) == 0 {
		return err
	}
	return r.releaseGone(ids, r.inFlight(ids), live)
}

// inFlight tells which of ids are pinned by a create in flight.
func (r *reconciler) inFlight(ids []string) map[string]bool {
	in := map[string]bool{}
	for _, id := range ids {
		in[id] = r.pinning.has(id)
	}
	return in
}

// releaseGone releases the pins of ids but those of containers live or in
// flight. One pin that cannot be released does not keep the others.
func (r *reconciler) releaseGone(ids []string, inFlight, live map[string]bool) error {
	var errs []error
	for _, id := range ids {
		if live[id] || inFlight[id] {
			continue
		}
		if err := r.pins.Release(id); err != nil {
			r.log.WithError(err).WithField("container", id).Warn("release pins of a container the backend no longer has")
			errs = append(errs, err)
			continue
		}
		r.log.WithField("container", id).Info("released pins of a container the backend no longer has")
	}
	return errors.Join(errs...)
}
