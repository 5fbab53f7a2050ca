package server

import (
	"context"
	"slices"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/cri-nstarget/cri-nstarget/metrics"
)

// The side queue never blocks who submits: beyond its bound a job is
// dropped and counted by channel; its goroutine ends with the server's
// life, with the job it runs.
func TestSideQueueBounded(t *testing.T) {
	life, stop := context.WithCancel(context.Background())
	var mu sync.Mutex
	dropped := map[string]int{}
	q := newSideQueue(life, logrus.NewEntry(logrus.New()), func(c string) {
		mu.Lock()
		defer mu.Unlock()
		dropped[c]++
	})
	ended := runHeld(q)
	for range sideQueueSize {
		if !q.submit(chanVerify, func(context.Context) {}) {
			t.Fatal("a job within the bound was dropped")
		}
	}
	for range 2 {
		if q.submit(chanExit, func(context.Context) {}) {
			t.Error("a job beyond the bound was queued")
		}
	}
	mu.Lock()
	if dropped[chanExit] != 2 {
		t.Errorf("dropped %v, want 2 on %s", dropped, chanExit)
	}
	mu.Unlock()
	stop()
	<-ended
	if q.submit(chanVerify, func(context.Context) {}) {
		t.Error("a job queued after the server stopped")
	}
}

// The metric counts every channel the side queue has, from the start.
func TestSideChannelsCounted(t *testing.T) {
	for _, c := range []string{chanVerify, chanExit, chanScan, chanLog} {
		if !slices.Contains(metrics.SideChannels, c) {
			t.Errorf("metrics.SideChannels %v lacks %s", metrics.SideChannels, c)
		}
	}
}

// A create's log lines on the side queue: beyond its bound one is dropped
// and counted on chanLog, never waited for; those queued when the server
// stops are written then (drain), and any after it at once, so that a
// shutdown loses none without a count.
func TestSideQueueLogLines(t *testing.T) {
	life, stop := context.WithCancel(context.Background())
	dropped := map[string]int{}
	q := newSideQueue(life, logrus.NewEntry(logrus.New()), func(c string) { dropped[c]++ }) // one goroutine counts: this one
	ended := runHeld(q)
	var mu sync.Mutex
	var written []int
	line := func(i int) func() {
		return func() {
			mu.Lock()
			defer mu.Unlock()
			written = append(written, i)
		}
	}
	for i := range sideQueueSize + 1 {
		q.logLater(line(i))
	}
	if dropped[chanLog] != 1 {
		t.Errorf("dropped %v, want 1 on %s", dropped, chanLog)
	}
	stop()
	<-ended
	q.logLater(line(-1))
	mu.Lock()
	defer mu.Unlock()
	if len(written) != sideQueueSize+1 || written[0] != 0 || written[sideQueueSize-1] != sideQueueSize-1 || written[sideQueueSize] != -1 {
		t.Errorf("%d lines written (first %v), want the %d queued, in order, then the one after the stop", len(written), written[:min(3, len(written))], sideQueueSize)
	}
}

// runHeld runs q's goroutine, and has it run a job that holds it until
// the server's life ends, so that what is submitted after stays queued. It
// returns a channel closed when the goroutine has ended.
func runHeld(q *sideQueue) <-chan struct{} {
	running, ended := make(chan struct{}), make(chan struct{})
	go func() {
		q.run()
		close(ended)
	}()
	q.submit(chanVerify, func(ctx context.Context) {
		close(running)
		<-ctx.Done() // the server's life ended
	})
	<-running
	return ended
}
