package server

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/cri-nstarget/cri-nstarget/events"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// reporter says what targeting decided: a log line per decision, the
// targeting metric, and an Event on the pod. It holds nothing but where
// those go.
type reporter struct {
	log     *logrus.Entry
	metrics Metrics   // nil: none
	events  EventSink // nil: none
}

// EventSink takes the Events the shim has for pods. Post never blocks
// (package events queues, paces and drops): a create never waits on the
// apiserver.
type EventSink interface {
	Post(events.Event)
}

// outcome reports what targeting decided (d) for container id, whose spec
// was written via: one log line per targeted namespace and one warning per
// fallback, each naming both containers, the targeting metric, and the
// Event on the pod.
func (r reporter) outcome(id, via string, d decision) {
	log := r.log.WithFields(logrus.Fields{"container": id, "name": d.name, "target": d.rec.Target, "via": via})
	for _, f := range d.fails {
		r.targeting(f.kind, "create", oci.Fallback, f.why)
		log.WithFields(logrus.Fields{"namespace": f.kind, "reason": f.reason, "reason_kind": f.why}).Warn("targeting fell back to the pod's namespace")
	}
	for kind, ns := range d.rec.Namespaces {
		if ns.Result == oci.Targeted {
			r.targeting(kind, "create", oci.Targeted, reasonNone)
			log.WithFields(logrus.Fields{"namespace": kind, "inode": ns.Inode, "pin": ns.Path}).Info("container joins the target's namespace")
		}
	}
	r.event(d.name, "create", d.rec)
}

// refused reports strict mode's refusal, if err is one: each fallback it
// refuses, to the targeting metric.
func (r reporter) refused(err error) {
	var ref *refusal
	if !errors.As(err, &ref) {
		return
	}
	for _, f := range ref.fails {
		r.targeting(f.kind, "create", resultRefused, f.why)
	}
}

// event posts, on the pod of the container named name, what targeting
// decided for it at stage (its record): whether it joined its target.
func (r reporter) event(name, stage string, rec oci.Record) {
	if r.events == nil {
		return
	}
	if e, ok := targetingEvent(name, stage, rec); ok {
		r.events.Post(e)
	}
}

// Reasons of the shim's Events, CamelCase as the kubelet's.
const (
	// Every namespace asked for was joined.
	eventTargeted = "Targeted"
	// Some namespace asked for runs in the pod's instead.
	eventFallback = "TargetingFallback"
)

// targetingEvent is the Event on the pod of container name for what rec
// says targeting decided at stage ("create": every namespace; "start": those
// that fell back then). It names containers by name, never by id; there is
// none for a request without a target or a pod.
func targetingEvent(name, stage string, rec oci.Record) (events.Event, bool) {
	if rec.Pod == nil || rec.Target == "" || name == "" {
		return events.Event{}, false
	}
	target, ref := targetNames(rec.TargetName)
	var joined, fell, whys []string
	for _, kind := range []string{string(namespaces.PID), string(namespaces.IPC)} {
		r, ok := rec.Namespaces[kind]
		switch {
		case !ok:
		case r.Result == oci.Targeted:
			joined = append(joined, kind)
		case stage == "create" || r.Stage == stage:
			fell = append(fell, kind)
			whys = append(whys, fmt.Sprintf("%s (%s)", inWords(reasonKind(r.ReasonKind), r.Stage, target, name), r.ReasonKind))
		}
	}
	e := events.Event{Pod: events.Pod{Namespace: rec.Pod.Namespace, Name: rec.Pod.Name, UID: rec.Pod.UID}, Container: name}
	if len(fell) == 0 {
		if stage != "create" || len(joined) == 0 {
			return events.Event{}, false
		}
		e.Reason = eventTargeted
		e.Message = fmt.Sprintf("Container %s joined the %s of %s (pinned by cri-nstarget): %s.",
			name, nsList(joined), ref, strings.Join(sees(joined, target), ", and "))
		return e, true
	}
	e.Reason, e.Warning = eventFallback, true
	var b strings.Builder
	fmt.Fprintf(&b, "Container %s ", name)
	if len(joined) > 0 && stage == "create" {
		fmt.Fprintf(&b, "joined the %s of %s (pinned by cri-nstarget), but ", nsList(joined), ref)
	}
	verb := "runs"
	if stage == "start" {
		verb = "starts"
	}
	fmt.Fprintf(&b, "%s in the pod's %s, not in %s's: ", verb, nsList(fell), ref)
	if len(whys) == 2 && whys[0] != whys[1] {
		fmt.Fprintf(&b, "%s: %s; %s: %s", fell[0], whys[0], fell[1], whys[1])
	} else {
		b.WriteString(whys[0])
	}
	fmt.Fprintf(&b, ". %s.", upper(strings.Join(seesPod(fell, target), ", and ")))
	e.Message = b.String()
	return e, true
}

// nsList is "pid namespace", "pid and ipc namespaces".
func nsList(kinds []string) string {
	if len(kinds) == 1 {
		return kinds[0] + " namespace"
	}
	return strings.Join(kinds, " and ") + " namespaces"
}

// sees says what joining kinds of target's namespaces gives.
func sees(kinds []string, target string) []string {
	var out []string
	for _, k := range kinds {
		switch k {
		case string(namespaces.PID):
			out = append(out, "it sees "+target+"'s processes")
		case string(namespaces.IPC):
			out = append(out, "it shares "+target+"'s IPC")
		}
	}
	return out
}

// seesPod says what falling back to the pod's kinds gives instead.
func seesPod(kinds []string, target string) []string {
	var out []string
	for _, k := range kinds {
		switch k {
		case string(namespaces.PID):
			out = append(out, "it sees the pod's processes, not "+target+"'s")
		case string(namespaces.IPC):
			out = append(out, "it shares the pod's IPC, not "+target+"'s")
		}
	}
	return out
}

func upper(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

// inWords says, for an operator, why container name could not join a
// namespace of target at stage: with names, never ids (the record's reason,
// in crictl inspect and the shim's log, has the detail).
func inWords(why reasonKind, stage, target, name string) string {
	switch why {
	case reasonTargetNotRunning:
		return target + " is not running"
	case reasonNamespaceGone:
		if stage == "start" {
			return target + " exited after " + name + " was created, and its PID namespace has no process left"
		}
		return target + " exited while cri-nstarget opened its namespaces"
	case reasonNamespaceOpenFailed:
		return "cri-nstarget could not open " + target + "'s namespaces"
	case reasonContainerdUnavailable:
		return "containerd's API did not answer cri-nstarget"
	case reasonUnknownMode:
		return "the request asked for a namespace mode cri-nstarget does not know"
	case reasonPinFailed:
		if stage == "start" {
			return "cri-nstarget could not check " + target + "'s PID namespace"
		}
		return "cri-nstarget could not pin " + target + "'s namespace"
	case reasonSpecUpdateFailed:
		return "cri-nstarget could not point " + name + "'s spec at " + target + "'s namespace"
	case reasonUsernsRefused:
		return name + "'s user namespace may not join " + target + "'s namespace (the kernel refuses it)"
	case reasonNRIConflict:
		return "another NRI plugin on the node sets " + name + "'s namespaces, and wins"
	}
	return "targeting failed"
}

// targeting reports one targeting decision to the metrics, if any.
func (r reporter) targeting(namespace, stage, result string, why reasonKind) {
	if r.metrics != nil {
		r.metrics.Targeting(namespace, stage, result, string(why))
	}
}

// stopwatch times the steps of one create, for the debug log: where a
// create's time goes (docs/reports/benchmarks.md, nstarget-bench -steps).
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
// took, the NRI answer's share of the forward (answer) among them.
func (r reporter) steps(id, via string, answer time.Duration, w *stopwatch) {
	if w == nil {
		return
	}
	w.laps["answer_us"] = answer.Microseconds()
	w.laps["total_us"] = time.Since(w.start).Microseconds()
	r.log.WithFields(w.laps).WithFields(logrus.Fields{"container": id, "via": via}).Debug("create steps")
}
