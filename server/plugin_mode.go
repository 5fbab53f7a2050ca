package server

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"

	nriapi "github.com/containerd/nri/pkg/api"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/intents"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/nriplugin"
	"github.com/cri-nstarget/cri-nstarget/oci"
	"github.com/cri-nstarget/cri-nstarget/pins"
)

// cri-nstarget's modes (Options.Mode, the configuration's mode).
const (
	// ModeProxy: a CRI proxy in front of containerd (the default).
	ModeProxy = "proxy"
	// ModePlugin: no CRI socket; containerd's own CRI serves the kubelet,
	// and cri-nstarget is an NRI plugin of it (containerd 2.2 and later).
	ModePlugin = "plugin"
)

// pluginMode is cri-nstarget as an NRI plugin alone (ModePlugin): containerd
// 2.2 and later make a TARGET container themselves, its PID namespace the
// target's /proc/<pid>/ns/pid, and send its CreateContainer event to the
// plugin, which answers it with a pin of that namespace: the target's
// container is found by that pid among the running containers of the same
// pod (procs), and then resolved, opened through a pidfd and confirmed as
// the proxy does (prepare), decided and rendered by the proxy's own NRI
// answer (answerNRI). What happens after the answer is the proxy's too: the
// check after a start (at PostStartContainer), the exits of targets, the
// runtime handlers, the record, the metrics and the Events.
//
// A fallback leaves the container as containerd made it (its own path,
// unpinned), with a Warning saying so; strict mode refuses it instead, and
// containerd makes nothing. It implements nriplugin.Watcher: each method
// runs on the NRI stub's goroutine while containerd waits.
type pluginMode struct {
	t *targeter
	// refused is Options.Refused; nil: none.
	refused func(why string)
	procs   *procs
	// life is the server's: the answers' late steps are bounded by it.
	life context.Context
	// names tells its pins' names in a spec apart (nil: it does not), and
	// self is its pid, through whose root its own are named (pluginPins).
	names pinNames
	self  int
	// metadata is containerd's own (its containers API), asked whether a
	// container is there (Exists); nil: never asked, no answer.
	metadata containerMetadata
}

// containerMetadata is containerd's metadata as the plugin mode asks it
// (containerdAPI).
type containerMetadata interface {
	Exists(ctx context.Context, id string) (bool, error)
}

// pinNames is how the plugin mode tells, in a container's spec, the name
// of a pin of its pins directory, and the process through whose root it is
// named (pins.Dir's Owner).
type pinNames interface {
	Owner(path string) (pid int, id string, ok bool)
}

// pluginPins is the plugin mode's pin store under stateDir: its pins are
// mounts of its own mount namespace, named to the runtime through its root
// as the host sees it (/proc/<its pid>/root/...), so that nothing is
// mounted on the host and no propagation reaches it. A pin then lives as
// long as the process. off says why that name would reach nothing (not in
// the host's PID namespace): the plugin then answers nothing.
func pluginPins(stateDir string) (store pinStore, names pinNames, off error) {
	dir, err := filepath.Abs(pins.Under(stateDir))
	if err != nil {
		return pins.New(pins.Under(stateDir)), nil, fmt.Errorf("pins directory: %w", err)
	}
	p := pins.Through(dir, os.Getpid())
	return p, p, pins.Reachable(dir, os.Getpid())
}

// releaseEarlier releases, at the start, what pins an earlier process of
// the plugin left in its pins directory: mounts of that process's mount
// namespace, gone with it (or, when it shared the host's, named through
// its root, which names nothing now), so that none is taken for a live
// pin by the check after a start or the exit watch.
func (m *pluginMode) releaseEarlier() {
	if err := m.t.recon.releaseAbsent(nil); err != nil {
		m.t.log.WithError(err).Warn("release the pins an earlier process of the plugin left")
	}
}

// trialID is the name of the pin the plugin makes at its start (canPin).
// It is no container's (containerd's ids are 64 hex digits), so no create
// or record names it; one that a killed process left is released with
// every earlier pin (releaseEarlier).
const trialID = "cri-nstarget-trial"

// canPin makes one pin as each TARGET create makes its own, of the
// plugin's own PID namespace, and releases it. A plugin that cannot pin
// (mount(2) refused: containerd's default AppArmor profile denies it
// whatever the capabilities, and without CAP_SYS_ADMIN the kernel does)
// so finds out at its start, and does nothing, not Ready and saying why,
// rather than answering every create with a fallback.
func (m *pluginMode) canPin() error {
	hs, err := namespaces.Open(m.self, []namespaces.Kind{namespaces.PID})
	if err != nil {
		return fmt.Errorf("a trial pin: %w", err)
	}
	err = m.t.pins.Hold(trialID, hs)
	for _, h := range hs {
		h.Close()
	}
	if err != nil {
		return fmt.Errorf("a trial pin, of the plugin's own PID namespace, failed, so no target could be pinned "+
			"(the pod needs CAP_SYS_ADMIN, and appArmorProfile Unconfined where AppArmor is on: containerd's default profile denies mount(2); deploy/plugin's pod has both): %w", err)
	}
	return m.t.pins.Release(trialID)
}

// targetPIDPath is the path containerd 2.2+ writes for a TARGET container's
// PID namespace: its target's init process's.
var targetPIDPath = regexp.MustCompile(`^/proc/([1-9][0-9]*)/ns/pid$`)

// pidTargeted is the pid whose PID namespace the spec (as the NRI event
// shows it) names as another process's; false when it names none, or names
// the pod sandbox's own: containerd writes /proc/<sandbox pid>/ns/pid for
// every container of a pod that shares its PID namespace (POD mode,
// shareProcessNamespace), which is no TARGET and not the plugin's.
func pidTargeted(pod *nriapi.PodSandbox, ctr *nriapi.Container) (uint32, bool) {
	for _, n := range ctr.GetLinux().GetNamespaces() {
		if n.GetType() != string(namespaces.PID) {
			continue
		}
		m := targetPIDPath.FindStringSubmatch(n.GetPath())
		if m == nil {
			return 0, false
		}
		pid, err := strconv.ParseUint(m[1], 10, 32)
		if err != nil || uint32(pid) == pod.GetPid() {
			return 0, false
		}
		return uint32(pid), true
	}
	return 0, false
}

// requestOf is the create containerd serves, as the proxy would have read
// it off the wire: the pod sandbox, the container's name and attempt, and
// the pod as its client named it.
func requestOf(pod *nriapi.PodSandbox, ctr *nriapi.Container) criwire.Create {
	return criwire.Create{SandboxID: pod.GetId(), Name: ctr.GetName(),
		Pod: oci.Pod{Namespace: pod.GetNamespace(), Name: pod.GetName(), UID: pod.GetUid()}}
}

// Create answers containerd's CreateContainer event: nothing for a
// container whose PID namespace names no other process's, else the pin of
// its target's (answer).
func (m *pluginMode) Create(pod *nriapi.PodSandbox, ctr *nriapi.Container) (*nriapi.ContainerAdjustment, error) {
	pid, ok := pidTargeted(pod, ctr)
	if !ok {
		return nil, nil
	}
	m.t.handlers.ran(pod.GetId(), pod.GetRuntimeHandler())
	ctx, cancel := context.WithTimeout(m.life, lateStepsTimeout)
	defer cancel()
	return m.answer(ctx, pod, ctr, pid)
}

// answer is the plugin mode's targeted create, top to bottom, each resource
// with one undo as in createTargeted: the target found by pid (or the
// pid left to containerd), the preparation (closed; it opens the target's
// namespaces through a pidfd at once, and asks containerd again in the
// background when /proc cannot tell the pid is the target's), the pins (released but for those kept), the intent record
// (removed once answered), then the proxy's own answer.
func (m *pluginMode) answer(ctx context.Context, pod *nriapi.PodSandbox, ctr *nriapi.Container, pid uint32) (_ *nriapi.ContainerAdjustment, retErr error) {
	t := m.t
	defer func() { t.report.refused(retErr) }()
	req := requestOf(pod, ctr)
	found, err := m.procs.find(ctx, pod.GetId(), pid)
	if err != nil || found.matches != 1 {
		return m.leave(req, ctr, pid, err)
	}
	id := found.ctr.GetId()
	prep := t.prepare(ctx, ctx, req, &plan{target: id, kinds: []namespaces.Kind{namespaces.PID}, pid: pid, found: &found})
	defer prep.close()
	pins := &createPins{store: t.pins, inFlight: &t.recon.pinning, log: t.log}
	defer pins.release()
	f, err := t.recon.begin(intents.Record{ID: intents.NewID(), Sandbox: req.SandboxID, Name: req.Name, Target: id, Container: ctr.GetId(), Plugin: true})
	if err != nil {
		return nil, err
	}
	defer f.answered()
	failpoint("create:nri-event")
	tg, d, err := t.decider(prep).decided()
	var ref *refusal
	switch {
	case errors.As(err, &ref):
		return nil, err
	case err != nil:
		return m.leave(req, ctr, pid, err)
	}
	m.decided(&d, tg, pid)
	adj, err := t.answerNRI(&d, tg, ctr, pins)
	if err != nil {
		return nil, err
	}
	if d.targets() {
		pins.keep(ctr.GetId())
	}
	t.report.outcome(ctr.GetId(), ViaNRI, d)
	t.after.created(ctr.GetId(), d.rec)
	failpoint("create:finished")
	return adj, nil
}

// decided finishes d, decided before the container existed: the target's
// process must be the one whose pid containerd wrote into the container's
// spec, when its namespaces were opened and when that pid is confirmed
// (waited for here): by /proc (its container's cgroup, the init of its PID
// namespace), or by containerd's word again (openConfirmed).
func (m *pluginMode) decided(d *decision, tg *target, pid uint32) {
	if tg.failed != nil {
		return
	}
	now, err := tg.pid, tg.confirm()
	var changed *pidChangedError
	var other *notTargetError
	switch {
	case errors.As(err, &other):
		d.fallBackTargeted(reasonPIDNotInPod, codes.FailedPrecondition,
			fmt.Sprintf("containerd pointed the container at pid %d, which is not the target's process (%s)", pid, other.why))
		return
	case errors.As(err, &changed):
		now = changed.now
	}
	if now != pid {
		d.fallBackTargeted(reasonPIDNotInPod, codes.FailedPrecondition,
			fmt.Sprintf("containerd pointed the container at pid %d, and the target's process is pid %d", pid, now))
	}
}

// procPIDPath is the PID namespace path containerd writes for pid.
func procPIDPath(pid uint32) string { return fmt.Sprintf("/proc/%d/ns/pid", pid) }

// leave answers the create of a container whose PID namespace containerd
// pointed at pid, which is no running container of its pod that
// cri-nstarget can resolve (why, when it tried): strict mode refuses it;
// otherwise it is left as containerd made it, with its record, and a
// Warning saying so.
func (m *pluginMode) leave(req criwire.Create, ctr *nriapi.Container, pid uint32, why error) (*nriapi.ContainerAdjustment, error) {
	reason := fmt.Sprintf("containerd pointed the container at the PID namespace of pid %d, which is no running container of its pod", pid)
	if why != nil {
		reason += fmt.Sprintf(" (%v)", why)
	}
	kind := string(namespaces.PID)
	d := decision{name: req.Name, rec: oci.Record{Pod: podOf(req.Pod), Mode: ModePlugin,
		Namespaces: map[string]oci.NamespaceRecord{kind: {PodPath: procPIDPath(pid)}}}}
	d.fallBack(kind, "create", reasonPIDNotInPod, codes.FailedPrecondition, reason)
	if err := strictErr(&d, m.t.strict); err != nil {
		return nil, err
	}
	adj, err := renderNRI(&d, pointing{})
	if err != nil {
		return nil, err
	}
	m.t.report.outcome(ctr.GetId(), ViaNRI, d)
	return adj, nil
}

// Refused: containerd undid a create the plugin had answered with a pin
// (undone says what was seen). From now on the plugin answers no create
// (containerd makes TARGET containers as its own) and is not healthy, until
// its next connection to containerd's NRI; the log says so, and Refused.
func (m *pluginMode) Refused(undone error) {
	m.t.log.WithError(undone).Warn("containerd refuses the plugin's namespace adjustments: it adjusts nothing more (not ready on /healthz) until containerd's NRI connects it again")
	if m.refused != nil {
		m.refused(undone.Error())
	}
}

// Exists tells whether containerd's metadata has container id (the NRI
// plugin tells so an undone create from an ordinary stop).
func (m *pluginMode) Exists(ctx context.Context, id string) (bool, error) {
	if m.metadata == nil {
		return false, errors.New("no containerd API to ask")
	}
	return m.metadata.Exists(ctx, id)
}

// Started is containerd's PostStartContainer: the container's pid is known
// from now on (procs), and a container with pins is checked (the verifier,
// as the proxy's start hook queues it).
func (m *pluginMode) Started(pod *nriapi.PodSandbox, ctr *nriapi.Container) {
	pr := procOf(ctr)
	pr.sandbox = pod.GetId()
	m.procs.started(ctr.GetId(), pr)
	if _, pinned := m.t.pins.Path(ctr.GetId(), namespaces.PID); pinned {
		m.t.after.started(ctr.GetId())
	}
}

// Removed is containerd's RemoveContainer (also when its create failed
// after the answer): the container's pins are released.
func (m *pluginMode) Removed(ctr *nriapi.Container) {
	id := ctr.GetId()
	m.procs.removed(id)
	if err := m.t.pins.Release(id); err != nil {
		m.t.log.WithError(err).WithField("container", id).Warn("release pins; retried at the next NRI synchronization")
	}
	m.t.after.removed(id) // after the release, as removeContainer's
}

// PodRemoved is containerd's RemovePodSandbox: its containers' pins went
// with each RemoveContainer.
func (m *pluginMode) PodRemoved(pod *nriapi.PodSandbox) {
	m.procs.podRemoved(pod.GetId())
	m.t.handlers.removed(pod.GetId())
}

// Synchronized is containerd's Synchronize, at every connection (the
// plugin's start, containerd's restart): the running containers' pids and
// the pods' runtime handlers are learnt again, the pins of containers
// containerd no longer has released (those that still exist are kept), and
// what a crash left in the intent records is reconciled once containerd is
// free to answer (reconcileSoon).
func (m *pluginMode) Synchronized(pods []*nriapi.PodSandbox, ctrs []*nriapi.Container) {
	m.procs.reset(ctrs)
	live := make(map[string]bool, len(ctrs))
	for _, c := range ctrs {
		live[c.GetId()] = true
	}
	for _, p := range pods {
		m.t.handlers.ran(p.GetId(), p.GetRuntimeHandler())
	}
	if err := m.t.recon.releaseAbsent(live); err != nil {
		m.t.log.WithError(err).Warn("release the pins of containers containerd no longer has")
	}
	m.pinsLost(pods, ctrs)
	m.t.recon.reconcileSoon()
	m.t.log.WithFields(logrus.Fields{"pods": len(pods), "containers": len(ctrs)}).Info("NRI plugin synchronized")
}

// pinsLost finds, among the containers of a synchronization (ctrs, in
// pods), those created and not started whose spec names a pin of another
// process of the plugin: pinned by a predecessor, whose pins went with it.
// Their start will fail (the path names nothing now; never another
// namespace), so each gets a Warning on its pod saying so, and what is
// left of it here is released and forgotten, as the reconciler does with a
// container whose create it did not finish: nothing blocks a new debug.
func (m *pluginMode) pinsLost(pods []*nriapi.PodSandbox, ctrs []*nriapi.Container) {
	if m.names == nil {
		return
	}
	byID := make(map[string]*nriapi.PodSandbox, len(pods))
	for _, p := range pods {
		byID[p.GetId()] = p
	}
	for _, c := range ctrs {
		pid, path, lost := m.lostPin(c)
		if !lost {
			continue
		}
		m.t.log.WithFields(logrus.Fields{"container": c.GetId(), "name": c.GetName(), "pin": path, "pid": pid}).
			Warn("a container created, not started, names the pin of an earlier process of the plugin, gone with it: its start will fail")
		if pod := byID[c.GetPodSandboxId()]; pod != nil {
			m.t.report.eventOf(pinLostEvent(pod, c.GetName(), path), true)
		}
		if err := m.t.pins.Release(c.GetId()); err != nil {
			m.t.log.WithError(err).WithField("container", c.GetId()).Warn("release pins; retried at the next NRI synchronization")
		}
		m.t.after.removed(c.GetId())
	}
}

// lostPin tells whether c is created and not started, and its spec's PID
// namespace is a pin named through the root of another process than this
// one (pid): that pin's path.
func (m *pluginMode) lostPin(c *nriapi.Container) (pid int, path string, lost bool) {
	if c.GetState() != nriapi.ContainerState_CONTAINER_CREATED {
		return 0, "", false
	}
	for _, n := range c.GetLinux().GetNamespaces() {
		if n.GetType() != string(namespaces.PID) {
			continue
		}
		pid, _, ok := m.names.Owner(n.GetPath())
		return pid, n.GetPath(), ok && pid != m.self
	}
	return 0, "", false
}

// pinLostEvent is the Warning on pod for its container name, created and
// not started, whose spec names the pin at path, lost with the plugin's
// restart.
func pinLostEvent(pod *nriapi.PodSandbox, name, path string) Event {
	return Event{Pod: oci.Pod{Namespace: pod.GetNamespace(), Name: pod.GetName(), UID: pod.GetUid()}, Container: name, Warning: true,
		Reason: eventPinLost,
		Message: fmt.Sprintf("cri-nstarget's plugin restarted after it pinned the target's PID namespace for container %s, before its start: "+
			"the pin (%s) was lost with the plugin's process, so the start of %s will fail, and it joins no other namespace in its place. "+
			"Run kubectl debug again.", name, path, name),
	}
}

var _ nriplugin.Watcher = (*pluginMode)(nil)
