package main

import (
	"context"
	"errors"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cri-nstarget/cri-nstarget/installer"
)

// verdict is what one outcome of the installer means for its pod.
type verdict struct {
	ready  bool   // the node is settled: the pod is Ready
	reason string // what /readyz says
	retry  bool   // try again after the retry interval
	fatal  error  // not the node's: the process ends with it
}

// judge reads an outcome: done is what a success says. The pod's
// readiness is the pod's: a node refused, rolled back or left on the
// version before is safe and decided (installer.Settled), its pod Ready;
// a node failed, or an install paused on an apiserver out of reach, is
// not, and is tried again.
func judge(done string, err error) verdict {
	var f *installer.Failure
	switch {
	case err == nil:
		return verdict{ready: true, reason: done}
	case errors.As(err, &f) && installer.Settled(f.State):
		return verdict{ready: true, reason: f.Error()}
	case errors.As(err, &f):
		return verdict{retry: true, reason: f.Error()}
	case errors.Is(err, installer.ErrUnreachable):
		return verdict{retry: true, reason: "paused: " + err.Error()}
	}
	return verdict{fatal: err}
}

// settle runs op until the node is settled, and again every `every` while
// it is not, setting ready from each outcome. It returns nil once the node
// is settled or ctx ends, or the first error that is not the node's.
func settle(ctx context.Context, op func(context.Context) (string, error), ready *readiness, every time.Duration, log *logrus.Entry) error {
	for {
		done, err := op(ctx)
		if err != nil && ctx.Err() != nil {
			log.WithError(err).Info("stopped while waiting; nothing was left half done")
			return nil
		}
		v := judge(done, err)
		if v.fatal != nil {
			return v.fatal
		}
		ready.set(v.ready, v.reason)
		if !v.retry {
			if err != nil {
				log.WithField("ready", v.ready).Warn(v.reason)
			} else {
				log.WithField("ready", v.ready).Info(v.reason)
			}
			return nil
		}
		log.WithField("retry_in", every).Warn(v.reason)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
	}
}

// recheck runs settle again every `every` (0: never) until ctx ends,
// while installed says the node is installed (a node refused, rolled back
// or upgrade-failed is not asked again, nor told again in an Event): a
// kubelet file rewritten since (kubeadm upgrade node writes its own) is
// pointed at the shim again, and a shim found unhealthy rolled back,
// without waiting for this pod's restart.
func recheck(ctx context.Context, op func(context.Context) (string, error), installed func() bool, ready *readiness, every, retry time.Duration, log *logrus.Entry) error {
	for every > 0 {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(every):
		}
		if !installed() {
			continue
		}
		if err := settle(ctx, op, ready, retry, log); err != nil {
			return err
		}
	}
	<-ctx.Done()
	return nil
}
