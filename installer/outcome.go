package installer

import (
	"context"
	"errors"
	"time"
)

// ErrUnreachable marks an error of Cluster that is no answer: the apiserver
// could not be reached, timed out, or was overloaded (5xx, 429). It says
// nothing of the node: a wait that gets it pauses, and no decision is taken
// on it.
var ErrUnreachable = errors.New("the apiserver is unreachable")

// Settled says whether a node whose label is state is safe and decided:
// its kubelet on a runtime that serves (the shim, or containerd as before),
// and nothing left for its installer to do. The installer's pod is Ready in
// exactly these states, so that one refused or rolled-back node does not
// stop a DaemonSet's rollout; "failed" (the kubelet maybe on a socket
// nothing serves) and the states under way are not settled.
func Settled(state string) bool {
	switch state {
	case StateInstalled, StateRefused, StateRolledBack, StateUpgradeBad, "":
		return true
	}
	return false
}

// Installed is the version the state on the host says is installed, ""
// when none is: what the pod reports, never this installer's own version
// when the node runs another.
func (in *Installer) Installed() (string, error) {
	st, err := loadState(in.o.Root)
	if err != nil || st.Phase != PhaseDone {
		return "", err
	}
	return st.Version, nil
}

// waitKnown is waitFor for a check that asks the apiserver (a stopWait
// ends it at once, as waitFor's). An error that
// is ErrUnreachable is no answer: the wait never ends on it, it looks less
// often (Poll doubled up to 16 Poll), and the time the apiserver was
// unreachable is added to the deadline, with at least a quarter of
// ReadyTimeout left once it answers again (the kubelet's status is then
// posted anew). The bound thus counts only time in which the node could be
// seen.
func (in *Installer) waitKnown(ctx context.Context, deadline time.Time, check func(context.Context) error) error {
	poll := in.o.Poll
	var down time.Time // since when the apiserver is unreachable; zero: it answers
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		var stop stopWait
		if errors.As(err, &stop) {
			return stop.error
		}
		now := time.Now()
		switch {
		case errors.Is(err, ErrUnreachable):
			if down.IsZero() {
				down = now
				in.o.Log.WithError(err).Warn("the apiserver is unreachable: the wait pauses until it answers")
			}
			poll = min(2*poll, 16*in.o.Poll)
		case !down.IsZero():
			deadline = later(deadline.Add(now.Sub(down)), now.Add(in.o.ReadyTimeout/4))
			in.o.Log.WithField("deadline", deadline.Format(time.RFC3339)).Info("the apiserver answers again: the wait goes on")
			down, poll = time.Time{}, in.o.Poll
		}
		if down.IsZero() && !now.Before(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.Join(ctx.Err(), err)
		case <-time.After(poll):
		}
	}
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}
