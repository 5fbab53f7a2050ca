package server

import (
	"context"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// catchUp looks, after each subscription to containerd's events (the
// shim's start, containerd's restart), for what was missed while no events
// were read: the containers pinned in a target's PID namespace are watched
// again, those whose target exited meanwhile and took them along are told
// (once: their record says so), and those started without a check are
// checked. It reads each pinned container's record and the state of it and
// of its target: two calls for each, bounded by the pins on disk.
//
// Right after containerd's restart its CRI may not answer yet, and a start
// that was in containerd when it went down (its caller told of a reset
// connection) may leave the container running, or already exited, without
// a start the shim saw: while a pinned container could not be read, or one not yet checked
// is not running yet, the catch-up is done again, every catchUpEvery, at
// most catchUpTries times.
func (a *afterAnswer) catchUp(ctx context.Context) { a.catchUpTry(ctx, 1) }

// The catch-ups after one subscription while something is still to see:
// about 30 s.
const (
	catchUpTries = 15
	catchUpEvery = 2 * time.Second
)

func (a *afterAnswer) catchUpTry(ctx context.Context, try int) {
	if a.scan(ctx) && try < catchUpTries {
		a.side.later(catchUpEvery, chanScan, func(ctx context.Context) { a.catchUpTry(ctx, try+1) })
	}
}

// scan is one catch-up; again says that something is still to see: a
// pinned container whose record or state could not be read, or one not
// yet checked that has not started (yet).
func (a *afterAnswer) scan(ctx context.Context) (again bool) {
	ids, err := a.pins.IDs()
	if err != nil {
		a.log.WithError(err).Warn("catch up after subscribing to containerd's events: list the pins")
		return false
	}
	for _, id := range ids {
		spec, err := a.records.read(ctx, id)
		if err != nil {
			again = again || !notFound(err)
			continue
		}
		rec, ok, err := oci.ParseRecord(spec.Annotations)
		if err != nil || !ok {
			continue
		}
		d, dst := a.exits.status(ctx, id)
		if a.verify != nil && unchecked(rec) {
			switch dst {
			case runtimeapi.ContainerState_CONTAINER_RUNNING, runtimeapi.ContainerState_CONTAINER_EXITED:
				// exited: it ran; what the check can still see (most
				// often that it cannot: it is gone) is said all the same
				a.verify.started(id)
			case runtimeapi.ContainerState_CONTAINER_CREATED, runtimeapi.ContainerState_CONTAINER_UNKNOWN:
				again = true
			}
		}
		if ns := rec.Namespaces[string(namespaces.PID)]; ns.Result != oci.Targeted || rec.TargetExited != nil || rec.Target == "" {
			continue
		}
		a.exits.rewatch(ctx, id, rec.Target, d, dst)
	}
	return again
}

// notFound: containerd has no such object (the container was removed).
func notFound(err error) bool {
	s, ok := status.FromError(err)
	return ok && s.Code() == codes.NotFound
}

// unchecked: some namespace of rec was pointed at a pin and not checked.
func unchecked(rec oci.Record) bool {
	for _, ns := range rec.Namespaces {
		if ns.Result == oci.Targeted && ns.Path != "" && ns.Verify == nil {
			return true
		}
	}
	return false
}
