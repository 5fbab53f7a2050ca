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
	// chanLog: a create's outcome lines (reporter.outcome), written once
	// its answer has gone back.
	chanLog = "log"
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

	// mu guards lastLog and stopped; a leaf.
	mu      sync.Mutex
	lastLog map[string]time.Time // when a drop on each channel was last logged
	stopped bool                 // run has ended: log lines are written by their caller (logLater)
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

// run runs the jobs until the server's life ends, then writes the log
// lines still queued (drain).
func (q *sideQueue) run() {
	for {
		select {
		case <-q.life.Done():
			q.drain()
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

// logLater queues write, a log line's, on chanLog; it never blocks. A
// line that does not fit is dropped and counted. Once run has ended (the
// server is stopping: no answer waits on it), it is written at once, so
// that no line is lost without a count at a shutdown.
func (q *sideQueue) logLater(write func()) {
	q.mu.Lock()
	stopped := q.stopped
	if !stopped {
		select {
		case q.jobs <- sideJob{channel: chanLog, run: func(context.Context) { write() }}:
			q.mu.Unlock()
			return
		default:
		}
	}
	q.mu.Unlock()
	if stopped {
		write()
		return
	}
	q.drop(chanLog)
}

// drain, once the server's life has ended, writes the log lines still
// queued and drops the other jobs (checks need the life that ended); from
// then on logLater writes its lines at once.
func (q *sideQueue) drain() {
	q.mu.Lock()
	q.stopped = true
	q.mu.Unlock()
	for {
		select {
		case j := <-q.jobs:
			if j.channel == chanLog {
				j.run(q.life)
			}
		default:
			return
		}
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
		q.log.WithField("channel", channel).Warn("the side queue is full: a check or a log line after an answer was dropped (cri_nstarget_dropped_total counts them; logged once a minute)")
	}
}
