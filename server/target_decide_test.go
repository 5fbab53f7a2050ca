package server

import (
	"errors"
	"slices"
	"strings"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// TestDecide: the one tail both paths share, on plain values, without a
// server and without a pin store: what the container joins, what the
// record says, what strict mode refuses, and which pins are asked for.
func TestDecide(t *testing.T) {
	view := specView{ns: map[string]string{"pid": "/proc/42/ns/pid", "ipc": "/proc/42/ns/ipc"}}
	userns := specView{ns: map[string]string{"pid": "/proc/42/ns/pid", "user": "/proc/42/ns/user"}}
	for _, tc := range []struct {
		desc    string
		v       specView
		pinErr  error
		canJoin bool
		strict  bool
		pins    bool       // pins are asked for
		joins   bool       // the container joins the pin
		result  string     // the pid record's result
		why     reasonKind // its reason, if a fallback
		code    codes.Code // strict's refusal; OK for none
	}{
		{desc: "pinned", v: view, canJoin: true, pins: true, joins: true, result: oci.Targeted},
		{desc: "pin failed", v: view, pinErr: errors.New("mount: operation not permitted"), pins: true, result: oci.Fallback, why: reasonPinFailed},
		{desc: "pin failed, strict", v: view, pinErr: errors.New("mount: operation not permitted"), strict: true, pins: true, result: oci.Fallback, why: reasonPinFailed, code: codes.FailedPrecondition},
		{desc: "a user namespace that may join", v: userns, canJoin: true, pins: true, joins: true, result: oci.Targeted},
		{desc: "a user namespace the kernel would refuse", v: userns, result: oci.Fallback, why: reasonUsernsRefused},
		{desc: "a user namespace the kernel would refuse, strict", v: userns, strict: true, result: oci.Fallback, why: reasonUsernsRefused, code: codes.FailedPrecondition},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			h := &namespaces.Handle{Kind: namespaces.PID, ID: namespaces.ID{Dev: 4, Ino: 4026531836}}
			tg := &target{id: "app1", name: "app", handles: []*namespaces.Handle{h}}
			d := decisionFor(criwire.Create{Name: "debugger"}, &plan{target: "app1", kinds: []namespaces.Kind{namespaces.PID}}, tg)
			var asked [][]*namespaces.Handle
			env := decideEnv{
				canJoin: func(*namespaces.Handle, string) (bool, error) { return tc.canJoin, nil },
				stat:    func(string) (namespaces.ID, error) { return namespaces.ID{}, errors.New("no stat here") },
				pin: func(hs []*namespaces.Handle, shm *namespaces.Handle) (map[namespaces.Kind]string, error, error) {
					asked = append(asked, hs)
					if tc.pinErr != nil {
						return nil, tc.pinErr, nil
					}
					return map[namespaces.Kind]string{namespaces.PID: "/pins/c1/pid"}, nil, nil
				},
			}
			p := decide(&d, tg, tc.v, env)
			err := strictErr(&d, tc.strict)
			if status.Code(toStatus(err)) != tc.code {
				t.Fatalf("strict = %v, want code %v", err, tc.code)
			}
			if got := len(asked) > 0; got != tc.pins || got && (len(asked) != 1 || !slices.Equal(asked[0], tg.handles)) {
				t.Errorf("pins asked for %v, want the pid namespace's: %v", asked, tc.pins)
			}
			if got := p.ns["pid"]; (got == "/pins/c1/pid") != tc.joins {
				t.Errorf("pid joins %q, want the pin: %v", got, tc.joins)
			}
			if d.targets() != tc.joins {
				t.Errorf("the decision keeps pins: %v, want %v", d.targets(), tc.joins)
			}
			r := d.rec.Namespaces["pid"]
			if r.Result != tc.result || r.ReasonKind != string(tc.why) || tc.joins && (r.PodPath != "/proc/42/ns/pid" || r.Path != "/pins/c1/pid") {
				t.Errorf("pid record %+v, want %s (%s), and the pin and the pod's path (to fall back to at start) when joined", r, tc.result, tc.why)
			}
			if d.rec.Target != "app1" || d.rec.TargetName != "app" {
				t.Errorf("record names the target %q (%q), want app1 (app)", d.rec.Target, d.rec.TargetName)
			}
		})
	}
}

// TestDecideIPC: a joined ipc namespace shares SysV IPC and message queues
// with the target, and its /dev/shm where that can be had: the pod's when
// the target's is the pod's, else a pin of the target's in place of the
// backend's mount (its options kept), else the backend's with the reason.
func TestDecideIPC(t *testing.T) {
	podShm := namespaces.ID{Dev: 9, Ino: 1}
	targetShm := &namespaces.Handle{Kind: namespaces.Shm, ID: namespaces.ID{Dev: 9, Ino: 2}}
	withMounts := func(ms ...specs.Mount) specView {
		return specView{ns: map[string]string{"ipc": "/proc/42/ns/ipc"}, mounts: ms}
	}
	mqueue := specs.Mount{Destination: "/dev/mqueue", Type: "mqueue", Source: "mqueue"}
	shmMount := specs.Mount{Destination: "/dev/shm", Type: "bind", Source: "/run/sb1/shm", Options: []string{"rbind", "rprivate", "rw"}}
	for _, tc := range []struct {
		desc   string
		v      specView
		shm    *namespaces.Handle
		same   bool  // the pod's /dev/shm is the target's
		shmErr error // the /dev/shm pin fails
		shares []string
		shmAt  string // the record's shm
		why    string // in the record's shmReason
		mount  bool   // the container's /dev/shm is pointed at the pin
	}{
		{desc: "the target's /dev/shm is not the pod's", v: withMounts(mqueue, shmMount), shm: targetShm, shares: []string{"sysv", "mqueue", "shm"}, shmAt: "/pins/c1/shm", mount: true},
		{desc: "the target's /dev/shm is the pod's", v: withMounts(mqueue, shmMount), shm: targetShm, same: true, shares: []string{"sysv", "mqueue", "shm"}, shmAt: oci.ShmPod},
		{desc: "the target has no /dev/shm", v: withMounts(mqueue, shmMount), shares: []string{"sysv", "mqueue"}, why: "no /dev/shm"},
		{desc: "the backend gave no /dev/shm", v: withMounts(mqueue), shm: targetShm, shares: []string{"sysv", "mqueue"}, why: "no /dev/shm mount"},
		{desc: "the /dev/shm pin fails", v: withMounts(shmMount), shm: targetShm, shmErr: errors.New("mount: busy"), shares: []string{"sysv", "mqueue"}, why: "mount: busy"},
		{desc: "another /dev/mqueue", v: withMounts(specs.Mount{Destination: "/dev/mqueue", Type: "bind", Source: "/x"}, shmMount), shm: targetShm, same: true, shares: []string{"sysv", "shm"}, shmAt: oci.ShmPod},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			h := &namespaces.Handle{Kind: namespaces.IPC, ID: namespaces.ID{Dev: 4, Ino: 4026531839}}
			tg := &target{id: "app1", handles: []*namespaces.Handle{h}, shm: tc.shm}
			d := decisionFor(criwire.Create{Name: "debugger"}, &plan{target: "app1", kinds: []namespaces.Kind{namespaces.IPC}}, tg)
			var pinnedShm *namespaces.Handle
			env := decideEnv{
				canJoin: func(*namespaces.Handle, string) (bool, error) { return true, nil },
				stat: func(path string) (namespaces.ID, error) {
					if path == shmMount.Source && tc.same {
						return targetShm.ID, nil
					}
					return podShm, nil
				},
				pin: func(hs []*namespaces.Handle, shm *namespaces.Handle) (map[namespaces.Kind]string, error, error) {
					pinnedShm = shm
					paths := map[namespaces.Kind]string{namespaces.IPC: "/pins/c1/ipc"}
					if shm != nil && tc.shmErr == nil {
						paths[namespaces.Shm] = "/pins/c1/shm"
					}
					return paths, nil, tc.shmErr
				},
			}
			p := decide(&d, tg, tc.v, env)
			r := d.rec.Namespaces["ipc"]
			if r.Result != oci.Targeted || p.ns["ipc"] != "/pins/c1/ipc" {
				t.Fatalf("ipc record %+v, joins %q: want the namespace joined whatever its /dev/shm", r, p.ns["ipc"])
			}
			if !slices.Equal(r.Shares, tc.shares) || r.Shm != tc.shmAt || !strings.Contains(r.ShmReason, tc.why) || (tc.why == "") != (r.ShmReason == "") {
				t.Errorf("ipc record shares %v, shm %q, shmReason %q; want %v, %q, a reason with %q", r.Shares, r.Shm, r.ShmReason, tc.shares, tc.shmAt, tc.why)
			}
			if wantPin := tc.shm != nil && !tc.same && oci.MountIndex(&specs.Spec{Mounts: tc.v.mounts}, "/dev/shm") >= 0; (pinnedShm != nil) != wantPin {
				t.Errorf("the target's /dev/shm pinned: %v, want %v", pinnedShm != nil, wantPin)
			}
			switch {
			case !tc.mount && p.shm != nil:
				t.Errorf("/dev/shm pointed at %+v, want the backend's left", p.shm)
			case tc.mount && (p.shm == nil || p.shm.Source != "/pins/c1/shm" || p.shm.Type != "bind" || !slices.Equal(p.shm.Options, shmMount.Options)):
				t.Errorf("/dev/shm mount %+v, want the pin with the backend's options", p.shm)
			}
			if tc.mount && r.PodShm != shmMount.Source {
				t.Errorf("the pod's /dev/shm %q not kept in the record (to restore)", r.PodShm)
			}
		})
	}
}
