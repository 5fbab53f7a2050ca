package server

import (
	"fmt"
	"maps"
	"slices"
	"sync"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// decision is what targeting decided for one create, as plain values: the
// record the new container carries, and the fallbacks in the order they
// were decided (strict mode answers the first). Its one writer is whoever
// holds it: the create's handler, or the NRI answer, which builds its own
// and hands it over when it returns (nriAnswer).
type decision struct {
	name  string // the new container's, for messages
	rec   oci.Record
	fails []failure
}

// failure is one fallback, with the code strict mode answers it with.
type failure struct {
	kind   string
	code   codes.Code
	reason string
	why    reasonKind // reason, from a fixed set (metrics, logs)
}

// decisionFor is what is decided before the container exists, from the
// request (req, p) and its prepared target (tg): each namespace whose
// target was opened is targeted; each unknown mode, and each namespace
// whose target could not be opened, falls back.
func decisionFor(req criwire.Create, p *plan, tg *target) decision {
	d := decision{name: req.Name, rec: oci.Record{Target: tg.id, TargetName: tg.name, Pod: podOf(req.Pod), RuntimeHandler: tg.handler,
		Namespaces: map[string]oci.NamespaceRecord{}}}
	if p.pid != 0 {
		// the plugin mode: a fallback leaves the path containerd chose
		d.rec.Mode = ModePlugin
		d.rec.Namespaces[string(namespaces.PID)] = oci.NamespaceRecord{PodPath: procPIDPath(p.pid)}
	}
	for _, u := range p.unknown {
		d.fallBack(u.kind, "create", reasonUnknownMode, codes.InvalidArgument,
			fmt.Sprintf("unknown NamespaceMode %d for the %s namespace (known: POD, CONTAINER, NODE, TARGET)", u.mode, u.kind))
	}
	if f := tg.failed; f != nil {
		for _, k := range p.kinds {
			d.fallBack(string(k), "create", f.why, f.code, f.reason)
		}
		return d
	}
	for _, h := range tg.handles {
		d.rec.Namespaces[string(h.Kind)] = oci.NamespaceRecord{Result: oci.Targeted, Stage: "create", Inode: h.ID.Ino,
			PodPath: d.rec.Namespaces[string(h.Kind)].PodPath}
	}
	return d
}

// decider is one create's decision before its container exists, made once
// by whoever asks first (the choice of a path, the NRI answer, the Update
// path's tail, the plugin mode's answer): the preparation waited for, what
// decisionFor decides, and strict mode's refusal of what already falls
// back; or the caller's error. Each container the create tries is decided
// from a copy of it (decided), which decideContainer finishes. After a
// conflict with another NRI plugin (conflicted) it is the decision of the
// try refused, its namespaces falling back: the next try's starting point.
// Written by the once, then by conflicted on the create's handler, while
// no answer runs; read by each try after.
type decider struct {
	prep   *preparation
	strict bool
	once   sync.Once
	tg     *target
	d      decision
	err    error
}

// decider is the decision of the create prepared by prep.
func (t *targeter) decider(prep *preparation) *decider {
	return &decider{prep: prep, strict: t.strict}
}

// decided answers the target, a copy of the decision made before the
// container exists, and its error, made at the first call.
func (x *decider) decided() (*target, decision, error) {
	x.once.Do(func() {
		if x.tg, x.err = x.prep.wait(); x.err != nil {
			return
		}
		x.d = decisionFor(x.prep.req, x.prep.p, x.tg)
		x.err = strictErr(&x.d, x.strict)
	})
	return x.tg, x.d.clone(), x.err
}

// conflicted makes the decision of the next try that of the try another
// NRI plugin won (d, as its answer finished it; conflict, containerd's
// error): each namespace it still targets falls back; strict mode's refusal
// of the first fallback is the error.
func (x *decider) conflicted(d decision, conflict error) error {
	x.decided() // made already, by the answer that conflicted
	d.fallBackTargeted(reasonNRIConflict, codes.FailedPrecondition,
		fmt.Sprintf("another NRI plugin sets this container's namespaces too, and wins (%v)", conflict))
	x.d = d
	return strictErr(&x.d, x.strict)
}

// clone is d with its own record's namespaces and fallbacks, which
// deciding a container writes.
func (d decision) clone() decision {
	d.rec.Namespaces = maps.Clone(d.rec.Namespaces)
	d.fails = slices.Clone(d.fails)
	return d
}

// podOf is the pod a request's sandbox_config names, for the record; nil
// when it names none.
func podOf(p oci.Pod) *oci.Pod {
	if p == (oci.Pod{}) {
		return nil
	}
	return &p
}

func (d *decision) fallBack(kind string, stage string, why reasonKind, code codes.Code, reason string) {
	d.rec.Namespaces[kind] = oci.NamespaceRecord{Result: oci.Fallback, Stage: stage, Reason: reason, ReasonKind: string(why),
		PodPath: d.rec.Namespaces[kind].PodPath}
	d.fails = append(d.fails, failure{kind: kind, code: code, reason: reason, why: why})
}

// fallBackTargeted turns every namespace still targeted into a fallback,
// in the order of their kinds (strict mode answers the first).
func (d *decision) fallBackTargeted(why reasonKind, code codes.Code, reason string) {
	for _, kind := range slices.Sorted(maps.Keys(d.rec.Namespaces)) {
		if d.rec.Namespaces[kind].Result == oci.Targeted {
			d.fallBack(kind, "create", why, code, reason)
		}
	}
}

// unconfirmed turns tg's namespaces still targeted into fallbacks when the
// pid they were opened through could not be confirmed as the target's
// (err); one that already falls back keeps its reason.
func (d *decision) unconfirmed(tg *target, err error) {
	if err == nil {
		return
	}
	for _, h := range tg.handles {
		if d.rec.Namespaces[string(h.Kind)].Result != oci.Targeted {
			continue
		}
		d.fallBack(string(h.Kind), "create", whyNoNamespace(err), codeOf(err), fmt.Sprintf("open the target's namespaces: %v", err))
	}
}

// targets tells whether some namespace is still to be joined.
func (d *decision) targets() bool {
	for _, r := range d.rec.Namespaces {
		if r.Result == oci.Targeted {
			return true
		}
	}
	return false
}

// decideEnv is what decide asks of the world, injected: whether a user
// namespace may join a namespace (namespaces.CanJoin), a namespace's (or a
// directory's) identity (namespaces.Stat), and the pins, taken in one step
// for the container being decided (createPins.take): the pins of hs and,
// if not nil, of the target's /dev/shm. pin answers the pins' paths, or why
// the namespaces', or only the /dev/shm's, could not be made.
type decideEnv struct {
	canJoin func(h *namespaces.Handle, userns string) (bool, error)
	stat    func(path string) (namespaces.ID, error)
	pin     func(hs []*namespaces.Handle, shm *namespaces.Handle) (paths map[namespaces.Kind]string, nsErr, shmErr error)
}

// decideEnv is decide's world for container id: t's kernel checks, and the
// pins the create takes into pins.
func (t *targeter) decideEnv(id string, pins *createPins) decideEnv {
	return decideEnv{canJoin: t.canJoin, stat: t.stat,
		pin: func(hs []*namespaces.Handle, shm *namespaces.Handle) (map[namespaces.Kind]string, error, error) {
			return pins.take(id, hs, shm)
		}}
}

// decideContainer is the one decision of both paths, for the container
// the backend is making (the NRI answer) or made (the Update path), seen as
// v: d, decided before the container existed (before), is finished with the
// target's confirmation (unconfirmed), then, unless strict mode already
// refuses, decide (which takes the pins through env); strict mode's refusal
// of the first fallback, if any, is the error.
func (t *targeter) decideContainer(d *decision, tg *target, v specView, env decideEnv) (pointing, error) {
	d.unconfirmed(tg, tg.confirm())
	var p pointing
	if !t.strict || len(d.fails) == 0 {
		p = decide(d, tg, v, env)
	}
	return p, strictErr(d, t.strict)
}

// decide is the one tail of both paths, for the container the backend is
// making (NRI) or made (Update) with the namespaces and mounts in v: which
// of tg's namespaces still targeted in d it joins (not those its user
// namespace may not join), whether its /dev/shm is the target's, the pins
// for them (env.pin, one step), and all of it in d's record. What it
// returns is what the container is pointed at, empty when nothing joins a
// pin: then no pin is to be kept. It releases nothing, reports nothing,
// and does no I/O but env's: the kernel's checks, and the pins it takes.
func decide(d *decision, tg *target, v specView, env decideEnv) pointing {
	userns := v.ns[string(specs.UserNamespace)]
	var joins []*namespaces.Handle
	for _, h := range tg.handles {
		kind := string(h.Kind)
		r := d.rec.Namespaces[kind]
		if r.Result != oci.Targeted {
			continue
		}
		r.PodPath = v.ns[kind]
		d.rec.Namespaces[kind] = r
		if reason := joinRefused(h, userns, env.canJoin); reason != "" {
			d.fallBack(kind, "create", reasonUsernsRefused, codes.FailedPrecondition, reason)
			continue
		}
		joins = append(joins, h)
	}
	if len(joins) == 0 {
		return pointing{}
	}
	var ipc ipcSharing
	if r, ok := d.rec.Namespaces[string(namespaces.IPC)]; ok && r.Result == oci.Targeted {
		ipc = shareIPC(v.mounts, tg.shm, env.stat)
	}
	paths, nsErr, shmErr := env.pin(joins, ipc.pin)
	if nsErr != nil {
		d.fallBackTargeted(reasonPinFailed, codes.FailedPrecondition, fmt.Sprintf("pin the target's namespace: %v", nsErr))
		return pointing{}
	}
	p := pointing{ns: map[string]string{}}
	for _, h := range joins {
		kind := string(h.Kind)
		r := d.rec.Namespaces[kind]
		r.Path = paths[h.Kind]
		d.rec.Namespaces[kind] = r
		p.ns[kind] = r.Path
	}
	if r, ok := d.rec.Namespaces[string(namespaces.IPC)]; ok && r.Result == oci.Targeted {
		r.Shares, r.Shm, r.ShmReason, r.PodShm = ipc.shares, ipc.shm, ipc.why, ipc.podShm
		if m := ipc.mount; m != nil {
			if shmErr != nil {
				r.ShmReason = fmt.Sprintf("pin the target's /dev/shm: %v", shmErr)
			} else {
				m.Source = paths[namespaces.Shm]
				r.Shares, r.Shm = append(r.Shares, "shm"), m.Source
				p.shm = m
			}
		}
		d.rec.Namespaces[string(namespaces.IPC)] = r
	}
	return p
}

// joinRefused says why a container in the user namespace at userns (the
// spec's; "" for a new one or the host's, which can join anything the shim
// can open) could not join the namespace h holds, or "" if it can.
func joinRefused(h *namespaces.Handle, userns string, canJoin func(*namespaces.Handle, string) (bool, error)) string {
	if userns == "" {
		return ""
	}
	ok, err := canJoin(h, userns)
	switch {
	case err != nil:
		return fmt.Sprintf("check that the container's user namespace %s may join the target's %s namespace: %v", userns, h.Kind, err)
	case !ok:
		return fmt.Sprintf("the container's user namespace (%s) holds no rights in the user namespace that owns the target's %s namespace %s: the kernel would refuse the join", userns, h.Kind, h.ID)
	}
	return ""
}

// ipcSharing is what a joined ipc namespace shares with the target, as its
// record says it (shares, shm, why, podShm), and, where the container's
// /dev/shm is to be the target's, the mount that replaces the backend's
// (its source the pin of pin, once made).
type ipcSharing struct {
	shares           []string
	shm, why, podShm string
	mount            *specs.Mount
	pin              *namespaces.Handle
}

// shareIPC decides what a joined ipc namespace shares: SysV IPC and POSIX
// message queues belong to the namespace (the runtime mounts /dev/mqueue
// after joining it, unless mounts has another there); POSIX shared memory
// is the /dev/shm mount, the target's (shm, nil when it has none) where
// that is not the pod's already (stat tells). A /dev/shm that cannot be
// shared leaves the backend's, and says why: the namespace is still the
// target's.
func shareIPC(mounts []specs.Mount, shm *namespaces.Handle, stat func(string) (namespaces.ID, error)) ipcSharing {
	spec := &specs.Spec{Mounts: mounts}
	s := ipcSharing{shares: []string{"sysv"}}
	if i := oci.MountIndex(spec, "/dev/mqueue"); i < 0 || spec.Mounts[i].Type == "mqueue" {
		s.shares = append(s.shares, "mqueue")
	}
	if shm == nil {
		s.why = "the target has no /dev/shm"
		return s
	}
	i := oci.MountIndex(spec, "/dev/shm")
	if i < 0 {
		// nothing of the backend's to replace, and so nothing a fallback
		// could restore
		s.why = "the backend gave the container no /dev/shm mount"
		return s
	}
	pod := spec.Mounts[i]
	s.podShm = pod.Source
	if id, err := stat(pod.Source); err == nil && id == shm.ID {
		s.shares, s.shm = append(s.shares, "shm"), oci.ShmPod
		return s
	}
	m := specs.Mount{Destination: pod.Destination, Type: "bind", Options: []string{"rbind", "nosuid", "nodev", "noexec", "rw"}}
	if pod.Type == "bind" {
		m.Options = slices.Clone(pod.Options)
	}
	s.mount, s.pin = &m, shm
	return s
}

// refusal is strict mode's answer to a fallback: the error its caller gets,
// and the fallbacks it refuses, which the create that returns it reports
// once (reporter.refused).
type refusal struct {
	err   error // coded
	fails []failure
}

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// strictErr is strict mode's refusal of d's first fallback; nil when d
// has none, or without strict.
func strictErr(d *decision, strict bool) error {
	if !strict || len(d.fails) == 0 {
		return nil
	}
	f := d.fails[0]
	if f.why == reasonUnknownMode {
		return &refusal{fails: d.fails, err: coded(f.code, "strict targeting: container %s: %s (%s); without strict_targeting it would run in the pod's %s namespace",
			d.name, f.reason, f.why, f.kind)}
	}
	target, ref := targetNames(d.rec.TargetName)
	return &refusal{fails: d.fails, err: coded(f.code, "strict targeting: container %s cannot join the %s namespace of %s: %s (%s: %s); without strict_targeting %s",
		d.name, f.kind, ref, inWordsFor(f.why, "create", target, d.name, d.rec.RuntimeHandler), f.why, f.reason, withoutStrict(d.rec, f.kind))}
}

// withoutStrict says where a container would run without strict mode:
// in the pod's namespace (the proxy), or where containerd pointed it (the
// plugin mode).
func withoutStrict(rec oci.Record, kind string) string {
	if rec.Mode == ModePlugin {
		return "it would be left as containerd made it: in " + leftWhere(rec.Namespaces[kind].PodPath) + ", unpinned"
	}
	return "it would run in the pod's"
}

// leftWhere names the namespace containerd's path (the plugin mode's
// PodPath) names.
func leftWhere(path string) string {
	if path == "" {
		return "the namespace containerd chose"
	}
	return "the PID namespace containerd pointed it at (" + path + ")"
}

// specNotWritten decides what a create whose spec could not be written
// (err) comes to: the backend made it in the pod's namespaces, which is the
// fallback, without the record that could not be written; strict, a
// refusal of every namespace it asked for.
func specNotWritten(d *decision, err error, strict bool) error {
	why := whySpecNotUpdated(err)
	if !strict {
		d.fallBackTargeted(why, codeOf(err), fmt.Sprintf("update the container's spec: %v", err))
		return nil
	}
	var fails []failure
	for _, kind := range slices.Sorted(maps.Keys(d.rec.Namespaces)) {
		fails = append(fails, failure{kind: kind, code: codeOf(err), why: why})
	}
	target, ref := targetNames(d.rec.TargetName)
	return &refusal{fails: fails, err: coded(codeOf(err), "strict targeting: container %s cannot join the namespaces of %s: %s (%s: %w); it was removed",
		d.name, ref, inWords(why, "create", target, d.name), why, err)}
}

// targetNames are how messages name a target called name: by itself
// ("app") and as "target container app"; "the target" and "the target
// container" when its name is not known.
func targetNames(name string) (target, ref string) {
	if name == "" {
		return "the target", "the target container"
	}
	return name, "target container " + name
}
