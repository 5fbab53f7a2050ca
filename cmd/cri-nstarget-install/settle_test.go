package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cri-nstarget/cri-nstarget/installer"
)

func quiet() *logrus.Entry {
	l := logrus.New()
	l.SetOutput(io.Discard)
	return logrus.NewEntry(l)
}

// readyz is what /readyz answers now.
func readyz(r *readiness) (int, string) {
	w := httptest.NewRecorder()
	r.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/readyz", nil))
	return w.Code, strings.TrimSpace(w.Body.String())
}

// TestReadyWhenSafe: a node refused, rolled back or left on the version
// before is settled: its pod Ready (so a rollout moves on), /readyz saying
// why; a node failed, or paused on the apiserver, is not, and is tried
// again; an error not the node's ends the process.
func TestReadyWhenSafe(t *testing.T) {
	for _, tc := range []struct {
		err   error
		code  int
		retry bool
		body  string
	}{
		{nil, 200, false, "installed v2"},
		{&installer.Failure{State: installer.StateRefused, Reason: "no --config"}, 200, false, "refused: no --config"},
		{&installer.Failure{State: installer.StateRolledBack, Reason: "not Ready"}, 200, false, "rolled-back: not Ready"},
		{fmt.Errorf("upgrade: %w", &installer.Failure{State: installer.StateUpgradeBad, Reason: "trial"}), 200, false, "upgrade-failed: trial"},
		{&installer.Failure{State: installer.StateFailed, Reason: "the kubelet not Ready"}, 503, true, "failed: the kubelet not Ready"},
		{fmt.Errorf("get node: %w", installer.ErrUnreachable), 503, true, "paused: get node: the apiserver is unreachable"},
	} {
		ready := &readiness{reason: "install: under way"}
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		err := settle(ctx, func(context.Context) (string, error) {
			if calls++; calls > 1 {
				cancel()
			}
			return "installed v2", tc.err
		}, ready, time.Millisecond, quiet())
		code, body := readyz(ready)
		if err != nil || code != tc.code || body != tc.body || (calls > 1) != tc.retry {
			t.Errorf("outcome %v: settle %v, /readyz %d %q, %d calls; want %d %q, retried %v", tc.err, err, code, body, calls, tc.code, tc.body, tc.retry)
		}
		cancel()
	}
	fatal := errors.New("connect to systemd: no such file")
	if err := settle(context.Background(), func(context.Context) (string, error) { return "", fatal }, &readiness{}, time.Millisecond, quiet()); err != fatal {
		t.Errorf("an error not the node's: settle %v", err)
	}
}

// TestSettleRetriesFailed: a failed node is tried again every interval,
// its pod not Ready meanwhile, until its cause is gone; then Ready.
func TestSettleRetriesFailed(t *testing.T) {
	ready := &readiness{}
	var seen []int
	outcomes := []error{
		&installer.Failure{State: installer.StateFailed, Reason: "rolling back failed: containerd down"},
		&installer.Failure{State: installer.StateFailed, Reason: "rolling back failed: containerd down"},
		&installer.Failure{State: installer.StateRolledBack, Reason: "not Ready through the shim"},
	}
	calls := 0
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err := settle(ctx, func(context.Context) (string, error) {
		code, _ := readyz(ready)
		seen = append(seen, code)
		calls++
		return "", outcomes[min(calls, len(outcomes))-1]
	}, ready, time.Millisecond, quiet())
	code, body := readyz(ready)
	if err != nil || calls != 3 || code != 200 || body != "rolled-back: not Ready through the shim" || fmt.Sprint(seen) != "[503 503 503]" {
		t.Errorf("settle %v after %d calls (readyz before each %v), then /readyz %d %q", err, calls, seen, code, body)
	}
}

// TestRecheck: an installed node is checked again every interval (a
// kubelet file rewritten since is found without the pod's restart), until
// ctx ends; with no interval, never; a node not installed (refused, rolled
// back, upgrade-failed), never either.
func TestRecheck(t *testing.T) {
	for _, tc := range []struct {
		every     time.Duration
		installed bool
		want      bool
	}{{10 * time.Millisecond, true, true}, {0, true, false}, {10 * time.Millisecond, false, false}} {
		calls := 0
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		err := recheck(ctx, func(context.Context) (string, error) { calls++; return "installed v1", nil },
			func() bool { return tc.installed }, &readiness{}, tc.every, time.Millisecond, quiet())
		cancel()
		if err != nil || tc.want && calls < 5 || !tc.want && calls != 0 {
			t.Errorf("every %s, installed %v: recheck %v after %d checks in 200ms", tc.every, tc.installed, err, calls)
		}
	}
}
