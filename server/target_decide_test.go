package server

import (
	"errors"
	"testing"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// TestDecide: the one tail both paths share, on plain values and a fake pin
// store, without a server: what the container joins, what the record says,
// what strict mode refuses, and which pins stay.
func TestDecide(t *testing.T) {
	view := specView{ns: map[string]string{"pid": "/proc/42/ns/pid", "ipc": "/proc/42/ns/ipc"}}
	userns := specView{ns: map[string]string{"pid": "/proc/42/ns/pid", "user": "/proc/42/ns/user"}}
	for _, tc := range []struct {
		desc     string
		v        specView
		pinErr   error
		canJoin  bool
		strict   bool
		joins    bool       // the container joins the pin
		result   string     // the pid record's result
		why      reasonKind // its reason, if a fallback
		code     codes.Code // strict's refusal; OK for none
		keepPins bool
	}{
		{desc: "pinned", v: view, canJoin: true, joins: true, result: oci.Targeted, keepPins: true},
		{desc: "pin failed", v: view, pinErr: errors.New("mount: operation not permitted"), result: oci.Fallback, why: reasonPinFailed},
		{desc: "pin failed, strict", v: view, pinErr: errors.New("mount: operation not permitted"), strict: true, code: codes.FailedPrecondition},
		{desc: "a user namespace that may join", v: userns, canJoin: true, joins: true, result: oci.Targeted, keepPins: true},
		{desc: "a user namespace the kernel would refuse", v: userns, result: oci.Fallback, why: reasonUsernsRefused},
		{desc: "a user namespace the kernel would refuse, strict", v: userns, strict: true, code: codes.FailedPrecondition},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			pins := &fakePins{held: map[string]map[namespaces.Kind]string{}}
			log := logrus.New()
			log.SetLevel(logrus.PanicLevel)
			tg := &targeter{pins: pins, strict: tc.strict, log: logrus.NewEntry(log), report: reporter{log: logrus.NewEntry(log)},
				canJoin: func(*namespaces.Handle, string) (bool, error) { return tc.canJoin, nil }}
			h := &namespaces.Handle{Kind: namespaces.PID, ID: namespaces.ID{Dev: 4, Ino: 4026531836}}
			o := &outcome{name: "debugger", handles: []*namespaces.Handle{h},
				rec: oci.Record{Target: "app", Namespaces: map[string]oci.NamespaceRecord{"pid": {Result: oci.Targeted}}}}
			if err := tg.setPinPaths("c1", o); err != nil {
				t.Fatal(err)
			}
			if tc.pinErr == nil {
				pins.Hold("c1", o.handles)
			}
			p, err := tg.decide("c1", tc.v, o, tc.pinErr)
			if status.Code(toStatus(err)) != tc.code {
				t.Fatalf("decide = %v, want code %v", err, tc.code)
			}
			if _, kept := pins.held["c1"]; kept != tc.keepPins {
				t.Errorf("pins kept: %v, want %v", kept, tc.keepPins)
			}
			if err != nil {
				return
			}
			if got := p.ns["pid"]; (got == "/pins/c1/pid") != tc.joins {
				t.Errorf("pid joins %q, want the pin: %v", got, tc.joins)
			}
			r := o.rec.Namespaces["pid"]
			if r.Result != tc.result || r.ReasonKind != string(tc.why) || tc.joins && r.PodPath != "/proc/42/ns/pid" {
				t.Errorf("pid record %+v, want %s (%s), and the pod's path kept to fall back to at start", r, tc.result, tc.why)
			}
		})
	}
}
