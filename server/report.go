package server

import (
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// reporter says what targeting decided: a log line per decision, and the
// targeting metric. It holds nothing but where those go.
type reporter struct {
	log     *logrus.Entry
	metrics Metrics // nil: none
}

// outcome logs what targeting decided for container id: one line per targeted namespace, one warning per
// fallback, each naming both containers.
func (r reporter) outcome(id string, o *outcome) {
	log := r.log.WithFields(logrus.Fields{"container": id, "name": o.name, "target": o.rec.Target, "via": o.rec.Via})
	for _, f := range o.fails {
		r.targeting(f.kind, "create", oci.Fallback, f.why)
		log.WithFields(logrus.Fields{"namespace": f.kind, "reason": f.reason, "reason_kind": f.why}).Warn("targeting fell back to the pod's namespace")
	}
	for kind, ns := range o.rec.Namespaces {
		if ns.Result == oci.Targeted {
			r.targeting(kind, "create", oci.Targeted, reasonNone)
			log.WithFields(logrus.Fields{"namespace": kind, "inode": ns.Inode, "pin": ns.Path}).Info("container joins the target's namespace")
		}
	}
}

// targeting reports one targeting decision to the metrics, if any.
func (r reporter) targeting(namespace, stage, result string, why reasonKind) {
	if r.metrics != nil {
		r.metrics.Targeting(namespace, stage, result, string(why))
	}
}

// stopwatch times the steps of one create, for the debug log: where a
// create's time goes (docs/benchmarks.md, nstarget-bench -steps).
type stopwatch struct {
	last  time.Time
	start time.Time
	laps  logrus.Fields
}

// stopwatch starts timing a create's steps when the log takes debug lines;
// otherwise it is nil, and timing costs nothing.
func (r reporter) stopwatch() *stopwatch {
	if !r.log.Logger.IsLevelEnabled(logrus.DebugLevel) {
		return nil
	}
	now := time.Now()
	return &stopwatch{last: now, start: now, laps: logrus.Fields{}}
}

// lap ends the step named step (in microseconds, as step_us).
func (w *stopwatch) lap(step string) {
	if w == nil {
		return
	}
	now := time.Now()
	w.laps[step+"_us"] = now.Sub(w.last).Microseconds()
	w.last = now
}

// steps logs, at debug level, how long each step of container id's create
// took, the NRI answer's share of the forward among them.
func (r reporter) steps(id string, o *outcome, w *stopwatch) {
	if w == nil {
		return
	}
	w.laps["answer_us"] = o.answerTook.Microseconds()
	w.laps["total_us"] = time.Since(w.start).Microseconds()
	r.log.WithFields(w.laps).WithFields(logrus.Fields{"container": id, "via": o.rec.Via}).Debug("create steps")
}
