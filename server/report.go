package server

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

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
	// later writes a create's outcome lines once its answer has gone back
	// (the side queue's logLater); nil: at once (what runs after an answer
	// already, and tests).
	later func(write func())
}

// EventSink takes the Events the shim has for pods. Post never blocks
// (package events, which cmd/cri-nstarget hands them to, queues, paces and
// drops): a create never waits on the apiserver.
type EventSink interface {
	Post(Event)
}

// Event is what the shim has to say about one container of a pod (posted
// by package events, whose Event has the same fields).
type Event struct {
	Pod       oci.Pod
	Container string // the container's name, never its id
	Warning   bool   // type Warning; else Normal
	Reason    string // CamelCase, as the kubelet's ("TargetingFallback")
	Message   string // at most events.MaxMessage bytes of it are posted
}

// outcome reports what targeting decided (d) for container id, whose spec
// was written via: one log line per targeted namespace and one warning per
// fallback, each naming both containers and stamped now, written after the
// answer (later); the targeting metric, and the Event on the pod.
func (r reporter) outcome(id, via string, d decision) {
	log := r.log.WithFields(logrus.Fields{"container": id, "name": d.name, "target": d.rec.Target, "via": via}).WithTime(time.Now())
	var lines []func()
	for _, f := range d.fails {
		r.targeting(f.kind, "create", oci.Fallback, f.why)
		e := log.WithFields(logrus.Fields{"namespace": f.kind, "reason": f.reason, "reason_kind": f.why})
		lines = append(lines, func() { e.Warn("targeting fell back to the pod's namespace") })
	}
	for kind, ns := range d.rec.Namespaces {
		if ns.Result == oci.Targeted {
			r.targeting(kind, "create", oci.Targeted, reasonNone)
			e := log.WithFields(logrus.Fields{"namespace": kind, "inode": ns.Inode, "pin": ns.Path})
			lines = append(lines, func() { e.Info("container joins the target's namespace") })
		}
	}
	r.write(lines)
	r.event(d.name, "create", d.rec)
}

// write writes lines, in order: later, or at once without a later.
func (r reporter) write(lines []func()) {
	if len(lines) == 0 {
		return
	}
	all := func() {
		for _, l := range lines {
			l()
		}
	}
	if r.later == nil {
		all()
		return
	}
	r.later(all)
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
	r.eventOf(targetingEvent(name, stage, rec))
}

// eventOf posts e, if ok.
func (r reporter) eventOf(e Event, ok bool) {
	if r.events != nil && ok {
		r.events.Post(e)
	}
}

// Reasons of the shim's Events, CamelCase as the kubelet's.
const (
	// Every namespace the container was pointed at was seen joined once it
	// had started (verify).
	eventTargeted = "Targeted"
	// Some namespace asked for runs in the pod's instead (create, start).
	eventFallback = "TargetingFallback"
	// The container started outside a namespace its spec was pointed at:
	// its runtime did not join the path (verify).
	eventNotJoined = "TargetNotJoined"
	// Whether the container joined could not be seen (verify).
	eventNotVerified = "TargetNotVerified"
	// The target's process, the init of the PID namespace the container
	// joined, exited, and the kernel killed the container with it.
	eventTargetExited = "TargetExited"
	// The plugin mode: the container, created and not started, names a
	// pin of the plugin's earlier process, lost with it (its start fails).
	eventPinLost = "TargetPinLost"
)

// targetingEvent is the Event on the pod of container name for what rec
// says targeting decided at stage ("create": every namespace; "start": those
// that fell back then): a Warning when some namespace falls back, none when
// every namespace asked for is pointed at the target's (what joins is said
// once it is seen, after the start: verifiedEvent). It names containers by
// name, never by id; there is none for a request without a target (but in
// the plugin mode, where the target may not be known) or a pod.
func targetingEvent(name, stage string, rec oci.Record) (Event, bool) {
	if rec.Pod == nil || (rec.Target == "" && rec.Mode != ModePlugin) || name == "" {
		return Event{}, false
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
			whys = append(whys, fmt.Sprintf("%s (%s)", inWordsFor(reasonKind(r.ReasonKind), r.Stage, target, name, rec.RuntimeHandler), r.ReasonKind))
		}
	}
	if len(fell) == 0 {
		return Event{}, false
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Container %s ", name)
	if len(joined) > 0 && stage == "create" {
		fmt.Fprintf(&b, "is pointed at the %s of %s (pinned by cri-nstarget; checked once it starts), but ", nsList(joined), ref)
	}
	if rec.Mode == ModePlugin {
		fmt.Fprintf(&b, "is left as containerd made it, in %s, unpinned: ", leftWhere(rec.Namespaces[fell[0]].PodPath))
	} else {
		verb := "runs"
		if stage == "start" {
			verb = "starts"
		}
		fmt.Fprintf(&b, "%s in the pod's %s, not in %s's: ", verb, nsList(fell), ref)
	}
	if len(whys) == 2 && whys[0] != whys[1] {
		fmt.Fprintf(&b, "%s: %s; %s: %s", fell[0], whys[0], fell[1], whys[1])
	} else {
		b.WriteString(whys[0])
	}
	if rec.Mode == ModePlugin {
		b.WriteString(". cri-nstarget did not pin the namespace: containerd's own TARGET applies, which does not hold the pid it names for the container.")
	} else {
		fmt.Fprintf(&b, ". %s.", upper(strings.Join(sees(fell, target, true), ", and ")))
	}
	return Event{Pod: *rec.Pod, Container: name, Warning: true, Reason: eventFallback, Message: b.String()}, true
}

// nsList is "pid namespace", "pid and ipc namespaces".
func nsList(kinds []string) string {
	if len(kinds) == 1 {
		return kinds[0] + " namespace"
	}
	return strings.Join(kinds, " and ") + " namespaces"
}

// gives is what joining each kind of namespace gives: of the target
// (%[1]s its name), and of the pod instead when it fell back.
var gives = map[string]struct{ target, pod string }{
	string(namespaces.PID): {"it sees %[1]s's processes", "it sees the pod's processes, not %[1]s's"},
	string(namespaces.IPC): {"it shares %[1]s's IPC", "it shares the pod's IPC, not %[1]s's"},
}

// sees says what joining kinds of target's namespaces gives, or, with
// pod, what falling back to the pod's gives instead.
func sees(kinds []string, target string, pod bool) []string {
	var out []string
	for _, k := range kinds {
		g, ok := gives[k]
		switch {
		case !ok:
		case pod:
			out = append(out, fmt.Sprintf(g.pod, target))
		default:
			out = append(out, fmt.Sprintf(g.target, target))
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
	return inWordsFor(why, stage, target, name, "")
}

// inWordsFor is inWords in a pod whose runtime handler is handler ("": not
// known).
func inWordsFor(why reasonKind, stage, target, name, handler string) string {
	switch why {
	case reasonRuntimeCannotJoin:
		return handlerWords(handler) + " does not join namespace paths (VM and user-space-kernel runtimes run the pod in a kernel of their own), so " +
			name + " cannot join " + target + "'s"
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
	case reasonPIDNotInPod:
		return "the pid containerd pointed " + name + " at is no running container of its pod that cri-nstarget could confirm as " + target
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

// handlerWords names the pod's runtime handler h ("": not known).
func handlerWords(h string) string {
	if h == "" {
		return "the pod's runtime handler"
	}
	return "the pod's runtime handler " + h
}

// verifiedEvent is the Event on the pod for what the check after the start
// saw (c): Normal Targeted when every namespace checked was joined, Warning
// TargetNotJoined when some was not (its runtime ignored the path), Warning
// TargetNotVerified when some could not be seen. Names, never ids; the
// namespaces as `readlink /proc/self/ns/KIND` prints them inside.
func verifiedEvent(c checked) (Event, bool) {
	rec := c.rec
	if rec.Pod == nil || rec.Target == "" || len(c.vs) == 0 {
		return Event{}, false
	}
	target, ref := targetNames(rec.TargetName)
	e := Event{Pod: *rec.Pod, Container: c.name}
	joined, notJoined, unverified := c.kinds(oci.Joined), c.kinds(oci.NotJoined), c.kinds(oci.Unverified)
	seen := func(kinds []string) string {
		var out []string
		for _, k := range kinds {
			out = append(out, fmt.Sprintf("%s:[%d]", k, c.vs[k].Inode))
		}
		return strings.Join(out, " and ")
	}
	var b strings.Builder
	switch {
	case len(notJoined) > 0:
		e.Reason, e.Warning = eventNotJoined, true
		var pinned []string
		for _, k := range notJoined {
			pinned = append(pinned, fmt.Sprintf("%s:[%d]", k, rec.Namespaces[k].Inode))
		}
		fmt.Fprintf(&b, "Container %s was pointed at the %s of %s, but its init process is in %s, not in %s's %s: %s did not join the namespace path "+
			"(VM and user-space-kernel runtimes run the pod in a kernel of their own). %s. ",
			c.name, nsList(notJoined), ref, seen(notJoined), target, strings.Join(pinned, " and "), handlerWords(rec.RuntimeHandler),
			upper(strings.Join(seesNot(notJoined, target), ", and ")))
		if rec.RuntimeHandler != "" {
			fmt.Fprintf(&b, "cri-nstarget falls back before create for runtime handler %s from now on; ", rec.RuntimeHandler)
		}
		b.WriteString("to debug " + target + " from inside its namespaces, use a runtime handler that joins namespace paths (runc).")
		switch {
		case c.stopped:
			fmt.Fprintf(&b, " Strict targeting stopped %s: its start had already been answered.", c.name)
		case c.stopErr != nil:
			fmt.Fprintf(&b, " Strict targeting could not stop %s: %v.", c.name, c.stopErr)
		}
	case len(unverified) > 0:
		e.Reason, e.Warning = eventNotVerified, true
		v := c.vs[unverified[0]]
		fmt.Fprintf(&b, "cri-nstarget could not verify that container %s joined the %s of %s: %s (%s). ",
			c.name, nsList(unverified), ref, verifyWords(reasonKind(v.ReasonKind), c.name), v.ReasonKind)
		if len(joined) > 0 {
			fmt.Fprintf(&b, "It did join the %s (%s). ", nsList(joined), seen(joined))
		}
		fmt.Fprintf(&b, "Inside %s, `readlink /proc/self/ns/%s` says which it is in.", c.name, unverified[0])
	default:
		e.Reason = eventTargeted
		pl := "it"
		if len(joined) > 1 {
			pl = "them"
		}
		fmt.Fprintf(&b, "Container %s joined the %s of %s, verified after it started: its init process is in %s (`readlink /proc/self/ns/%s` prints %s inside it), pinned by cri-nstarget; %s.",
			c.name, nsList(joined), ref, seen(joined), strings.Join(joined, "` and `/proc/self/ns/"), pl, strings.Join(sees(joined, target, false), ", and "))
	}
	e.Message = b.String()
	return e, true
}

// seesNot says what not joining kinds of target's namespaces leaves.
func seesNot(kinds []string, target string) []string {
	var out []string
	for _, k := range kinds {
		switch k {
		case string(namespaces.PID):
			out = append(out, "it does not see "+target+"'s processes")
		case string(namespaces.IPC):
			out = append(out, "it does not share "+target+"'s IPC")
		}
	}
	return out
}

// verifyWords says, for an operator, why a check could not see whether
// container name joined.
func verifyWords(why reasonKind, name string) string {
	switch why {
	case reasonNotVisible:
		return "its runtime shows no process of " + name + " on the host (VM and user-space-kernel runtimes run containers in a kernel of their own)"
	case reasonExitedUnread:
		return name + " had exited before cri-nstarget could look"
	case reasonPIDChanged:
		return "containerd's word on " + name + "'s process did not match the process cri-nstarget read, which may have been another"
	case reasonContainerdUnavailable:
		return "containerd's API did not answer cri-nstarget"
	case reasonPinFailed:
		return "cri-nstarget could not read its pin of the target's namespace"
	}
	return "cri-nstarget could not read " + name + "'s namespaces"
}

// targetExitedEvent is the Warning on the pod of container name, which
// joined its target's PID namespace (rec), when the target's process, that
// namespace's init, exited (status) and the kernel killed name with it.
func targetExitedEvent(name string, rec oci.Record, status uint32) (Event, bool) {
	if rec.Pod == nil || rec.Target == "" || name == "" {
		return Event{}, false
	}
	target, ref := targetNames(rec.TargetName)
	exit := fmt.Sprintf("exit code %d", status)
	if status > 128 {
		exit += fmt.Sprintf(", signal %d", status-128)
	}
	return Event{
		Pod: *rec.Pod, Container: name, Warning: true, Reason: eventTargetExited,
		Message: fmt.Sprintf("%s exited (%s), and the kernel killed container %s with it: %s ran in %s's pid namespace, and when a PID namespace's init "+
			"(here %s's process) exits, every other process in it is killed. That is why %s ended with exit code 137.",
			upper(ref), exit, name, name, target, target, name),
	}, true
}
