// Package claims is what nstarget-conformance's --mode claims of a node:
// the cases of the suite that a mode of cri-nstarget does not claim, and
// why. A node in the proxy mode, or any CRI runtime, claims every case;
// a node in the plugin mode (containerd's own endpoint, cri-nstarget an NRI
// plugin of it) does not claim the cases where only the proxy can act
// (README, "Which mode"). Every other case is claimed, a case added later
// included: a claimed case that fails fails the run.
//
// It imports nothing of cri-nstarget's, as the suite does not.
package claims

import (
	"fmt"
	"regexp"
	"strings"
)

// Modes --mode accepts: ModeAny claims every case; ModePlugin claims all
// but Plugin's.
const (
	ModeAny    = ""
	ModePlugin = "plugin"
)

// NotClaimed is a case's result, in the suite's report, when its mode does
// not claim it: neither pass, fail nor skip.
const NotClaimed = "not-claimed"

// Claim is a case a mode does not claim (its id matched by Case), and why.
// A claim without Failure is not run at all; with Failure, the case runs,
// and only a first failure that Failure matches is not claimed: any other
// fails the run.
type Claim struct {
	Case    *regexp.Regexp
	Failure *regexp.Regexp
	Reason  string
}

// Plugin is what the plugin mode does not claim.
var Plugin = []Claim{
	{Case: regexp.MustCompile(`^(userns/)?ipc-target$`),
		Reason: "IPC TARGET: containerd writes no IPC namespace path for TARGET, so NRI shows the plugin none to pin; the proxy's"},
	{Case: regexp.MustCompile(`^target-exited-before-(create|start)$`),
		Reason: "a target that is not running: containerd refuses it (the create or the start fails with its own code) before NRI sees it; the proxy's"},
	{Case: regexp.MustCompile(`^pid-reuse$`),
		Failure: regexp.MustCompile(`^StartContainer failed with Unknown: invalid target container: container "[0-9a-f]+" is not running`),
		Reason:  "the refusal's code: containerd refuses the start itself (Unknown), its target not running, and FailedPrecondition is the proxy's; still run, as the plugin claims the rest: a debug container in the stranger's namespace fails the run"},
	{Case: regexp.MustCompile(`^(cross-pod|unknown-target|sandbox-as-target|missing-target-id|malformed-target-id/.+|network-target)$`),
		Reason: "a typed refusal (FailedPrecondition, NotFound, InvalidArgument): containerd answers the create before NRI, with its own code; the proxy's"},
	{Case: regexp.MustCompile(`^unknown-mode/`),
		Reason: "an unknown NamespaceMode: containerd decides before NRI; the proxy's"},
}

// Of is mode's table: nil for ModeAny; an error names the modes there are.
func Of(mode string) ([]Claim, error) {
	switch mode {
	case ModeAny:
		return nil, nil
	case ModePlugin:
		return Plugin, nil
	}
	return nil, fmt.Errorf("--mode %q: want %q (any CRI runtime, every case claimed) or %q (cri-nstarget's plugin mode)", mode, ModeAny, ModePlugin)
}

// Unclaimed is the claim in cs that case id is not claimed, if any.
func Unclaimed(cs []Claim, id string) (Claim, bool) {
	for _, c := range cs {
		if c.Case.MatchString(id) {
			return c, true
		}
	}
	return Claim{}, false
}

// Runs tells whether a case not claimed still runs: only its Failure is
// not claimed.
func (c Claim) Runs() bool { return c.Failure != nil }

// Takes tells whether failure, the first of a case that runs, is the one
// not claimed.
func (c Claim) Takes(failure string) bool { return c.Failure != nil && c.Failure.MatchString(failure) }

// Said is the report's reason for a case not claimed: why, then what the
// suite saw when it ran ("" when it did not).
func (c Claim) Said(seen string) string {
	if seen == "" {
		return "not claimed (not run): " + c.Reason
	}
	return "not claimed: " + c.Reason + "; the suite: " + seen
}

// ReasonOf is the claim's reason in a report's Said, without what the
// suite saw: how a report's not-claimed cases are grouped by why.
func ReasonOf(said string) string {
	for _, p := range []string{"not claimed (not run): ", "not claimed: "} {
		if r, ok := strings.CutPrefix(said, p); ok {
			r, _, _ = strings.Cut(r, "; the suite: ")
			return r
		}
	}
	return said
}
