package soak

import (
	"fmt"
	"regexp"
	"strconv"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

// Outcome is the oracle's verdict on one debug container.
type Outcome string

const (
	// Joined: in its target's PID namespace, the one the target instance
	// printed, and its record says targeted at that namespace, and that
	// the shim verified it joined once it had started.
	Joined Outcome = "targeted"
	// FellBack: in a namespace other than the target's, and its record
	// says fallback with a reason.
	FellBack Outcome = "fallback"
	// Refused: never run; the runtime's answer to its create (or start)
	// was a gRPC status with a code that names the refusal (not Unknown,
	// not Internal).
	Refused Outcome = "refused"
	// DiedWithTarget: targeted (and verified joined), and killed before it
	// printed anything because its target's instance, the init of the PID
	// namespace it joined, exited first: the kernel kills every process of a PID
	// namespace whose init exits (pid_namespaces(7)). containerd's own
	// TARGET behaves the same; a container in any other namespace would
	// have lived on.
	DiedWithTarget Outcome = "died with its target"
	// Unseen: in its target's PID namespace, as its record says, and the
	// shim said after the start that it could not see it there, because
	// it had exited before the shim could read it (exited_unobserved: a
	// debugger that prints and exits within milliseconds, started while
	// containerd's events, whose task creation the shim reads it at, were
	// not reaching the shim, as around a containerd restart). The shim
	// claimed nothing it had not seen (a Warning TargetNotVerified, no
	// Normal Targeted); counted apart, it does not fail the run.
	Unseen Outcome = "not seen"
	// WrongJoin: anything else. It fails the run.
	WrongJoin Outcome = "wrong"
)

// Observation is what the soak saw of one debug container.
type Observation struct {
	// Made: the kubelet reported a container id, and the container ran.
	Made bool
	// Record is the targeting record containerd holds for it (nil: none).
	Record *oci.Record
	// DebugNS is the first line the debug container printed
	// ("pid:[INODE]"), TargetNS the one the target instance that the
	// record names printed at its start ("" when it is not known).
	DebugNS, TargetNS string
	// Error is the kubelet's message for a debug container never made
	// (CreateContainerError's), or for one that did not run; Code is the
	// gRPC code of the runtime's answer that the message came from ("" when
	// not known). The kubelet shows only a status's message on the pod, and
	// logs the code (see kubeletCode).
	Error, Code string
	// Killed: it ended by SIGKILL (exit 137); TargetEndedFirst: the target
	// instance its record names had exited by then (containerd's exit
	// times, within targetExitSlack).
	Killed, TargetEndedFirst bool
}

// Judge is the oracle: the outcome, and in words why.
func Judge(o Observation) (Outcome, string) {
	if !o.Made {
		switch o.Code {
		case "":
			return WrongJoin, fmt.Sprintf("not run, without a gRPC status: %q", o.Error)
		case "Unknown", "Internal":
			return WrongJoin, fmt.Sprintf("not run, with an untyped error (%s): %q", o.Code, o.Error)
		}
		return Refused, o.Code
	}
	if o.Record == nil {
		return WrongJoin, fmt.Sprintf("no targeting record (printed %q, error %q)", o.DebugNS, o.Error)
	}
	r, ok := o.Record.Namespaces["pid"]
	if !ok {
		return WrongJoin, "the targeting record has no pid entry"
	}
	if !nsRE.MatchString(o.DebugNS) {
		if r.Result == oci.Targeted && o.Killed && o.TargetEndedFirst {
			if why := unverified(r); why != "" {
				return WrongJoin, "killed as its target's PID namespace ended, but " + why
			}
			return DiedWithTarget, "killed as its target's PID namespace ended, before it printed"
		}
		return WrongJoin, fmt.Sprintf("record %s, but the debug container printed no PID namespace (%q; error %q)", r.Result, o.DebugNS, o.Error)
	}
	switch r.Result {
	case oci.Targeted:
		if want := "pid:[" + strconv.FormatUint(r.Inode, 10) + "]"; o.DebugNS != want {
			return WrongJoin, fmt.Sprintf("record says targeted at %s, the container is in %s", want, o.DebugNS)
		}
		if o.TargetNS == "" {
			return WrongJoin, fmt.Sprintf("targeted at %.12s, whose own PID namespace is not known", o.Record.Target)
		}
		if o.DebugNS != o.TargetNS {
			return WrongJoin, fmt.Sprintf("in %s, but target instance %.12s printed %s", o.DebugNS, o.Record.Target, o.TargetNS)
		}
		if r.Verify != nil && r.Verify.Result == oci.Unverified && r.Verify.ReasonKind == "exited_unobserved" {
			return Unseen, "in its target's " + o.DebugNS + "; the shim said it had exited before it could look"
		}
		if why := unverified(r); why != "" {
			return WrongJoin, "in its target's " + o.DebugNS + ", but " + why
		}
		return Joined, o.DebugNS
	case oci.Fallback:
		if r.Reason == "" || r.ReasonKind == "" {
			return WrongJoin, "fallback without a reason"
		}
		if o.TargetNS != "" && o.DebugNS == o.TargetNS {
			return WrongJoin, fmt.Sprintf("record says fallback (%s), but the container is in the target's %s", r.ReasonKind, o.DebugNS)
		}
		return FellBack, r.ReasonKind
	}
	return WrongJoin, fmt.Sprintf("record result %q", r.Result)
}

var nsRE = regexp.MustCompile(`^pid:\[\d+\]$`)

// unverified says why a targeted namespace's record does not say that the
// shim saw the container in it once it had started; "" when it does.
func unverified(r oci.NamespaceRecord) string {
	switch v := r.Verify; {
	case v == nil:
		return "the shim did not say what it saw after the start (no verify in the record)"
	case v.Result != oci.Joined:
		return fmt.Sprintf("the shim saw, after the start: %s (%s: %s)", v.Result, v.ReasonKind, v.Reason)
	case v.Inode != r.Inode:
		return fmt.Sprintf("the shim saw it, after the start, in pid:[%d], not the target's pid:[%d]", v.Inode, r.Inode)
	}
	return ""
}
