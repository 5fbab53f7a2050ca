package soak

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// watchdog gives every CRI call the soak makes a deadline (callTimeout) and
// counts the calls that reach it: a hang.
type watchdog struct {
	mu    sync.Mutex
	hangs []string // under mu
}

// call runs f with a deadline; reaching it is a hang, recorded with what.
func (w *watchdog) call(ctx context.Context, what string, f func(context.Context) error) error {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	start := time.Now()
	err := f(cctx)
	if ctx.Err() == nil && (errors.Is(err, context.DeadlineExceeded) || status.Code(err) == codes.DeadlineExceeded) {
		w.mu.Lock()
		w.hangs = append(w.hangs, fmt.Sprintf("%s at %s: no answer within %s", what, start.UTC().Format("15:04:05"), callTimeout))
		w.mu.Unlock()
	}
	return err
}

func (w *watchdog) hung() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.hangs...)
}
