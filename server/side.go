package server

import (
	"context"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
)

// The side queue's channels, as cri_nstarget_dropped_total labels them.
const (
	// chanVerify: the check, after a start, that the container joined the
	// namespaces its spec was pointed at.
	chanVerify = "verify"
	// chanExit: a target's exit, and the debuggers that died with it.
	chanExit = "exit"
	// chanScan: after each subscription to containerd's events, what was
	// missed while not subscribed (exits, checks).
	chanScan = "scan"
)

// sideQueueSize bounds the jobs waiting. A burst larger than this (a node
// starting hundreds of targeted debuggers at once) drops the checks beyond
// it, counted, rather than let them wait in memory.
const sideQueueSize = 256

// sideJobTimeout bounds one job's calls to containerd.
const sideJobTimeout = 30 * time.Second

// sideQueue runs what the shim does after an answer, away from any call:
// the checks after a start (verifier), the exits of targets (exitWatch),
// the catch-up. Its owner is afterAnswer, which builds it; Run starts its
// goroutine.
// Jobs wait in a bounded queue and run one at a time on one goroutine, so
// that they never compete with each other for a container's record;
// a job that does not fit is dropped and counted
// (cri_nstarget_dropped_total{channel}), never waited for. The goroutine
// ends with the server's life (Shutdown), with the job it runs.
type sideQueue struct {
	jobs    chan sideJob
	life    context.Context
	dropped func(channel string) // nil: not counted
	log     *logrus.Entry

	// mu guards lastLog; a leaf.
	mu      sync.Mutex
	lastLog map[string]time.Time // when a drop on each channel was last logged
}

type sideJob struct {
	channel string
	run     func(ctx context.Context)
}

// dropLogEvery: a channel's drops are logged at most this often.
const dropLogEvery = time.Minute

func newSideQueue(life context.Context, log *logrus.Entry, dropped func(string)) *sideQueue {
	return &sideQueue{jobs: make(chan sideJob, sideQueueSize), life: life, dropped: dropped, log: log, lastLog: map[string]time.Time{}}
}

// run runs the jobs until the server's life ends.
func (q *sideQueue) run() {
	for {
		select {
		case <-q.life.Done():
			return
		case j := <-q.jobs:
			ctx, cancel := context.WithTimeout(q.life, sideJobTimeout)
			j.run(ctx)
			cancel()
		}
	}
}

// submit queues run on channel; it never blocks. A job that does not fit,
// or comes once the server is stopping, is dropped (and counted, unless
// the server is stopping).
func (q *sideQueue) submit(channel string, run func(ctx context.Context)) bool {
	if q.life.Err() != nil {
		return false
	}
	select {
	case q.jobs <- sideJob{channel: channel, run: run}:
		return true
	default:
		q.drop(channel)
		return false
	}
}

// later submits run after d (at most a few seconds: a timer, no
// goroutine until then); once the server is stopping, it is not submitted.
func (q *sideQueue) later(d time.Duration, channel string, run func(ctx context.Context)) {
	time.AfterFunc(d, func() { q.submit(channel, run) })
}

func (q *sideQueue) drop(channel string) {
	if q.dropped != nil {
		q.dropped(channel)
	}
	q.mu.Lock()
	due := time.Since(q.lastLog[channel]) >= dropLogEvery
	if due {
		q.lastLog[channel] = time.Now()
	}
	q.mu.Unlock()
	if due {
		q.log.WithField("channel", channel).Warn("the side queue is full: a check after an answer was dropped (cri_nstarget_dropped_total counts them; logged once a minute)")
	}
}
