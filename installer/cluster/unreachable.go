package cluster

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/cri-nstarget/cri-nstarget/installer"
)

// maxBackoff caps the pause between tries.
const maxBackoff = 30 * time.Second

// unreachable says whether err is no answer from the apiserver: anything
// but a status it sent, and the statuses that say it could not answer now
// (5xx, 429, its timeouts).
func unreachable(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	code := status.Status().Code
	return code >= 500 || code == 429 || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}

// classify wraps err with what, and with installer.ErrUnreachable when it
// is no answer.
func classify(what string, err error) error {
	if unreachable(err) {
		return fmt.Errorf("%s: %w: %w", what, installer.ErrUnreachable, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}

// retry calls f, each call bounded by Timeout, until it succeeds, fails
// with an answer, or ctx ends; between tries it pauses Backoff, doubled
// each time up to maxBackoff. It returns f's last error, classified.
func (n *Node) retry(ctx context.Context, what string, f func(context.Context) error) error {
	pause := n.Backoff
	if pause <= 0 {
		pause = time.Second
	}
	for {
		cctx, cancel := n.ctx(ctx)
		err := f(cctx)
		cancel()
		if err == nil || !unreachable(err) {
			if err != nil {
				return classify(what, err)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return classify(what, errors.Join(err, ctx.Err()))
		case <-time.After(pause):
		}
		pause = min(2*pause, maxBackoff)
	}
}
