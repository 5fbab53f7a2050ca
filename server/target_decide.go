package server

import (
	"fmt"
	"maps"
	"slices"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"google.golang.org/grpc/codes"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// outcome is what targeting decided for one CreateContainer. It has one
// owner at a time: the create's handler (createContainer), except while
// the create's NRI event is being answered (answerNRI, on the NRI stub's
// goroutine), from the event's claim until nriplugin's Settle returns,
// which is only once the answer is done, never on a timeout alone.
type outcome struct {
	name    string // the new container's name, for messages
	rec     oci.Record
	handles []*namespaces.Handle // open target namespaces, until pinned
	shm     *namespaces.Handle   // the target's /dev/shm, opened with an ipc namespace
	pid     uint32               // the target's pid the handles were opened through
	fails   []failure            // fallbacks, in the order they were decided
	// sandbox is the target's (and so the new container's) sandbox id, in full.
	sandbox string
	// pinning is the container pinned in an NRI event, while its create is
	// in flight; held: its pins are kept (the answer pointed it at them).
	pinning string
	held    bool
	// answerTook is how long the NRI answer took (within forward's time)
	answerTook time.Duration
}

// failure is one fallback, with the code strict mode answers it with.
type failure struct {
	kind   string
	code   codes.Code
	reason string
	why    reasonKind // reason, from a fixed set (metrics, logs)
}

func (o *outcome) fallBack(kind string, stage string, why reasonKind, code codes.Code, reason string) {
	o.rec.Namespaces[kind] = oci.NamespaceRecord{Result: oci.Fallback, Stage: stage, Reason: reason, ReasonKind: string(why)}
	o.fails = append(o.fails, failure{kind: kind, code: code, reason: reason, why: why})
}

// fallBackTargeted turns every namespace still targeted into a fallback,
// in the order of their kinds (strict mode answers the first).
func (o *outcome) fallBackTargeted(why reasonKind, code codes.Code, reason string) {
	for _, kind := range slices.Sorted(maps.Keys(o.rec.Namespaces)) {
		if o.rec.Namespaces[kind].Result == oci.Targeted {
			o.fallBack(kind, "create", why, code, reason)
		}
	}
}

// pinsWanted: some opened namespace is still to be joined, and not pinned yet.
func (o *outcome) pinsWanted() bool {
	if o.held {
		return false
	}
	for _, h := range o.handles {
		if o.rec.Namespaces[string(h.Kind)].Result == oci.Targeted {
			return true
		}
	}
	return false
}

func (o *outcome) close() {
	for _, h := range o.handles {
		h.Close()
	}
	if o.shm != nil {
		o.shm.Close()
	}
}

// unconfirmed turns the opened namespaces into fallbacks: the pid could not
// be confirmed as the target's.
func (o *outcome) unconfirmed(err error) {
	for _, h := range o.handles {
		o.fallBack(string(h.Kind), "create", whyNoNamespace(err), codeOf(err), fmt.Sprintf("open the target's namespaces: %v", err))
	}
	o.close()
	o.handles, o.shm = nil, nil
}

// setPinPaths records where the pins of o's namespaces go for container id.
func (t *targeter) setPinPaths(id string, o *outcome) error {
	paths, err := t.pins.Paths(id, o.handles)
	if err != nil {
		return err
	}
	for _, h := range o.handles {
		r := o.rec.Namespaces[string(h.Kind)]
		r.Path = paths[h.Kind]
		o.rec.Namespaces[string(h.Kind)] = r
	}
	return nil
}

func (t *targeter) releasePins(id string) {
	if err := t.pins.Release(id); err != nil {
		t.log.WithError(err).WithField("container", id).Warn("release pins")
	}
}

// decide is the one tail of both paths, for container id, which the backend
// is making (NRI) or made (Update) with the namespaces in v: given whether
// its pins could be made (pinErr), it records each namespace's result,
// decides what the container joins (point), and applies strict mode. An
// error is strict mode's refusal. Pins are kept only when the container
// joins one.
func (t *targeter) decide(id string, v specView, o *outcome, pinErr error) (pointing, error) {
	if pinErr != nil {
		o.fallBackTargeted(reasonPinFailed, codes.FailedPrecondition, fmt.Sprintf("pin the target's namespace: %v", pinErr))
	}
	p := t.point(id, v, o)
	if err := t.strictErr(o); err != nil {
		t.releasePins(id)
		return pointing{}, err
	}
	if len(p.ns) == 0 {
		t.releasePins(id) // nothing joins a pin: none is kept
	}
	return p, nil
}

// point decides, for the container id the backend made (v), which of o's
// namespaces it joins and which /dev/shm it gets, and records it all in
// o.rec. Both paths (the spec Update and the NRI event) write what it decides.
func (t *targeter) point(id string, v specView, o *outcome) pointing {
	p := pointing{ns: map[string]string{}}
	userns := v.ns[string(specs.UserNamespace)]
	for _, h := range o.handles {
		kind := string(h.Kind)
		r := o.rec.Namespaces[kind]
		if r.Result != oci.Targeted {
			continue
		}
		r.PodPath = v.ns[kind]
		o.rec.Namespaces[kind] = r
		if reason := t.joinRefused(h, userns); reason != "" {
			o.fallBack(kind, "create", reasonUsernsRefused, codes.FailedPrecondition, reason)
			continue
		}
		p.ns[kind] = r.Path
	}
	if r, ok := o.rec.Namespaces[string(namespaces.IPC)]; ok && r.Result == oci.Targeted {
		p.shm = t.shareIPC(id, v.mounts, o)
	}
	return p
}

// joinRefused says why a container in the user namespace at userns (the
// spec's; "" for a new one or the host's, which can join anything the shim
// can open) could not join the namespace h holds, or "" if it can.
func (t *targeter) joinRefused(h *namespaces.Handle, userns string) string {
	if userns == "" {
		return ""
	}
	ok, err := t.canJoin(h, userns)
	switch {
	case err != nil:
		return fmt.Sprintf("check that the container's user namespace %s may join the target's %s namespace: %v", userns, h.Kind, err)
	case !ok:
		return fmt.Sprintf("the container's user namespace (%s) holds no rights in the user namespace that owns the target's %s namespace %s: the kernel would refuse the join", userns, h.Kind, h.ID)
	}
	return ""
}

// shareIPC records what a targeted ipc namespace shares, and returns the
// /dev/shm mount that points at the target's where that is not the pod's:
// SysV IPC and POSIX message queues belong to the namespace (the runtime
// mounts /dev/mqueue after joining it); POSIX shared memory is the /dev/shm
// mount. A /dev/shm that cannot be shared leaves the backend's and says why:
// the namespace is still the target's.
func (t *targeter) shareIPC(id string, mounts []specs.Mount, o *outcome) *specs.Mount {
	spec := &specs.Spec{Mounts: mounts}
	r := o.rec.Namespaces[string(namespaces.IPC)]
	defer func() { o.rec.Namespaces[string(namespaces.IPC)] = r }()
	r.Shares, r.Shm, r.ShmReason, r.PodShm = []string{"sysv"}, "", "", ""
	if i := oci.MountIndex(spec, "/dev/mqueue"); i < 0 || spec.Mounts[i].Type == "mqueue" {
		r.Shares = append(r.Shares, "mqueue")
	}
	if o.shm == nil {
		r.ShmReason = "the target has no /dev/shm"
		return nil
	}
	i := oci.MountIndex(spec, "/dev/shm")
	if i < 0 {
		// nothing of the backend's to replace, and so nothing a fallback
		// could restore
		r.ShmReason = "the backend gave the container no /dev/shm mount"
		return nil
	}
	pod := spec.Mounts[i]
	r.PodShm = pod.Source
	if id, err := namespaces.Stat(pod.Source); err == nil && id == o.shm.ID {
		r.Shares, r.Shm = append(r.Shares, "shm"), oci.ShmPod
		return nil
	}
	path, ok := t.pins.Path(id, namespaces.Shm) // pinned already by an earlier answer
	var err error
	if !ok {
		path, err = t.pins.Add(id, o.shm)
	}
	if err != nil {
		r.ShmReason = fmt.Sprintf("pin the target's /dev/shm: %v", err)
		return nil
	}
	m := specs.Mount{Destination: pod.Destination, Type: "bind", Source: path, Options: []string{"rbind", "nosuid", "nodev", "noexec", "rw"}}
	if pod.Type == "bind" {
		m.Options = slices.Clone(pod.Options)
	}
	r.Shares, r.Shm = append(r.Shares, "shm"), path
	return &m
}

// strictErr is the error strict mode answers the first fallback with.
func (t *targeter) strictErr(o *outcome) error {
	if !t.strict || len(o.fails) == 0 {
		return nil
	}
	for _, f := range o.fails {
		t.report.targeting(f.kind, "create", resultRefused, f.why)
	}
	f := o.fails[0]
	if f.why == reasonUnknownMode {
		return coded(f.code, "strict targeting: container %s: %s (%s); without strict_targeting it would run in the pod's %s namespace",
			o.name, f.reason, f.why, f.kind)
	}
	target, ref := targetNames(o.rec.TargetName)
	return coded(f.code, "strict targeting: container %s cannot join the %s namespace of %s: %s (%s: %s); without strict_targeting it would run in the pod's",
		o.name, f.kind, ref, inWords(f.why, "create", target, o.name), f.why, f.reason)
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

// specNotWritten decides what a create whose spec could not be written
// (err) comes to: the backend made it in the pod's namespaces, which is the
// fallback, without the record that could not be written; strict, an error.
// No pin is kept either way.
func (t *targeter) specNotWritten(id string, o *outcome, err error) error {
	t.releasePins(id)
	if t.strict {
		for kind := range o.rec.Namespaces {
			t.report.targeting(kind, "create", resultRefused, whySpecNotUpdated(err))
		}
		target, ref := targetNames(o.rec.TargetName)
		return coded(codeOf(err), "strict targeting: container %s cannot join the namespaces of %s: %s (%s: %w); it was removed",
			o.name, ref, inWords(whySpecNotUpdated(err), "create", target, o.name), whySpecNotUpdated(err), err)
	}
	o.fallBackTargeted(whySpecNotUpdated(err), codeOf(err), fmt.Sprintf("update the container's spec: %v", err))
	return nil
}
