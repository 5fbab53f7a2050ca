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
	hold, running := make(chan struct{}), make(chan struct{})
	ended := make(chan struct{})
	go func() {
		q.run()
		close(ended)
	}()
	q.submit(chanVerify, func(ctx context.Context) {
		close(running)
		select {
		case <-hold:
		case <-ctx.Done(): // the server's life ended
		}
	})
	<-running
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
	for _, c := range []string{chanVerify, chanExit, chanScan} {
		if !slices.Contains(metrics.SideChannels, c) {
			t.Errorf("metrics.SideChannels %v lacks %s", metrics.SideChannels, c)
		}
	}
}
