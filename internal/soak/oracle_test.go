package soak

import (
	"testing"

	"github.com/cri-nstarget/cri-nstarget/oci"
)

func rec(result, kind string, inode uint64) *oci.Record {
	r := oci.NamespaceRecord{Result: result, Inode: inode, ReasonKind: kind}
	if kind != "" {
		r.Reason = "because " + kind
	}
	if result == oci.Targeted {
		r.Verify = &oci.Verification{Result: oci.Joined, Stage: "verify", Inode: inode}
	}
	return &oci.Record{Target: "0123456789abcdef", Namespaces: map[string]oci.NamespaceRecord{"pid": r}}
}

// seen is rec targeted at inode, with what the shim saw after the start
// (nil: nothing said).
func seen(inode uint64, v *oci.Verification) *oci.Record {
	r := rec(oci.Targeted, "", inode)
	ns := r.Namespaces["pid"]
	ns.Verify = v
	r.Namespaces["pid"] = ns
	return r
}

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		desc string
		obs  Observation
		want Outcome
	}{
		{"joined", Observation{Made: true, Record: rec(oci.Targeted, "", 7), DebugNS: "pid:[7]", TargetNS: "pid:[7]"}, Joined},
		{"joined, not verified", Observation{Made: true, Record: seen(7, nil), DebugNS: "pid:[7]", TargetNS: "pid:[7]"}, WrongJoin},
		{"joined, the shim said it exited before it could look", Observation{Made: true, Record: seen(7, &oci.Verification{Result: oci.Unverified, ReasonKind: "exited_unobserved"}), DebugNS: "pid:[7]", TargetNS: "pid:[7]"}, Unseen},
		{"elsewhere, the shim said it exited before it could look", Observation{Made: true, Record: seen(7, &oci.Verification{Result: oci.Unverified, ReasonKind: "exited_unobserved"}), DebugNS: "pid:[9]", TargetNS: "pid:[7]"}, WrongJoin},
		{"joined, seen unverified otherwise", Observation{Made: true, Record: seen(7, &oci.Verification{Result: oci.Unverified, ReasonKind: "pid_changed"}), DebugNS: "pid:[7]", TargetNS: "pid:[7]"}, WrongJoin},
		{"joined, seen not joined", Observation{Made: true, Record: seen(7, &oci.Verification{Result: oci.NotJoined, Inode: 9}), DebugNS: "pid:[7]", TargetNS: "pid:[7]"}, WrongJoin},
		{"joined, seen in another namespace", Observation{Made: true, Record: seen(7, &oci.Verification{Result: oci.Joined, Inode: 9}), DebugNS: "pid:[7]", TargetNS: "pid:[7]"}, WrongJoin},
		{"died with its target, not verified", Observation{Made: true, Record: seen(7, nil), TargetNS: "pid:[7]", Error: "exit 137 Error: ", Killed: true, TargetEndedFirst: true}, WrongJoin},
		{"joined a namespace other than the target instance's", Observation{Made: true, Record: rec(oci.Targeted, "", 7), DebugNS: "pid:[7]", TargetNS: "pid:[8]"}, WrongJoin},
		{"record targeted, container elsewhere", Observation{Made: true, Record: rec(oci.Targeted, "", 7), DebugNS: "pid:[9]", TargetNS: "pid:[7]"}, WrongJoin},
		{"targeted, target's namespace unknown", Observation{Made: true, Record: rec(oci.Targeted, "", 7), DebugNS: "pid:[7]"}, WrongJoin},
		{"fell back with a reason", Observation{Made: true, Record: rec(oci.Fallback, "target_not_running", 0), DebugNS: "pid:[5]", TargetNS: "pid:[7]"}, FellBack},
		{"fell back, target unknown", Observation{Made: true, Record: rec(oci.Fallback, "target_not_running", 0), DebugNS: "pid:[5]"}, FellBack},
		{"fallback without a reason", Observation{Made: true, Record: rec(oci.Fallback, "", 0), DebugNS: "pid:[5]"}, WrongJoin},
		{"fallback, yet in the target's namespace", Observation{Made: true, Record: rec(oci.Fallback, "target_not_running", 0), DebugNS: "pid:[7]", TargetNS: "pid:[7]"}, WrongJoin},
		{"no record", Observation{Made: true, DebugNS: "pid:[5]"}, WrongJoin},
		{"ran, printed nothing", Observation{Made: true, Record: rec(oci.Targeted, "", 7), TargetNS: "pid:[7]", Error: "StartError"}, WrongJoin},
		{"targeted, killed as its target ended first", Observation{Made: true, Record: rec(oci.Targeted, "", 7), TargetNS: "pid:[7]", Error: "exit 137 Error: ", Killed: true, TargetEndedFirst: true}, DiedWithTarget},
		{"targeted, killed while its target lived on", Observation{Made: true, Record: rec(oci.Targeted, "", 7), TargetNS: "pid:[7]", Error: "exit 137 Error: ", Killed: true}, WrongJoin},
		{"targeted, its target ended, but not killed", Observation{Made: true, Record: rec(oci.Targeted, "", 7), TargetNS: "pid:[7]", Error: "exit 1 Error: ", TargetEndedFirst: true}, WrongJoin},
		{"fell back, killed as the target ended", Observation{Made: true, Record: rec(oci.Fallback, "target_not_running", 0), Error: "exit 137 Error: ", Killed: true, TargetEndedFirst: true}, WrongJoin},
		{"refused, typed", Observation{Error: "cri-nstarget: target app is not running", Code: "FailedPrecondition"}, Refused},
		{"refused, Internal", Observation{Error: "boom", Code: "Internal"}, WrongJoin},
		{"not made, no status", Observation{Error: "context deadline exceeded"}, WrongJoin},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got, why := Judge(tc.obs); got != tc.want {
				t.Errorf("Judge = %s (%s), want %s", got, why, tc.want)
			}
		})
	}
}
