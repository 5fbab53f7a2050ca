package server

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	nriapi "github.com/containerd/nri/pkg/api"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// What the targeting needs from outside, small so unit tests can fake it.
type (
	// backendCRI is the typed part of the backend's CRI the shim calls itself.
	backendCRI interface {
		ListContainers(ctx context.Context, in *runtimeapi.ListContainersRequest, opts ...grpc.CallOption) (*runtimeapi.ListContainersResponse, error)
		ListPodSandbox(ctx context.Context, in *runtimeapi.ListPodSandboxRequest, opts ...grpc.CallOption) (*runtimeapi.ListPodSandboxResponse, error)
		RemoveContainer(ctx context.Context, in *runtimeapi.RemoveContainerRequest, opts ...grpc.CallOption) (*runtimeapi.RemoveContainerResponse, error)
		Version(ctx context.Context, in *runtimeapi.VersionRequest, opts ...grpc.CallOption) (*runtimeapi.VersionResponse, error)
	}
	taskLookup interface {
		TaskPID(ctx context.Context, id string) (uint32, error)
	}
	// criContainers finds a CRI container by its full id in containerd's
	// own metadata: its pod sandbox, or errNotCRIContainer.
	criContainers interface {
		CRIContainer(ctx context.Context, id string) (string, error)
	}
	specEditor interface {
		EditSpec(ctx context.Context, id string, edit func(*specs.Spec) ([]oci.Opt, error)) error
	}
	pinStore interface {
		Paths(id string, hs []*namespaces.Handle) (map[namespaces.Kind]string, error)
		Hold(id string, hs []*namespaces.Handle) error
		Add(id string, h *namespaces.Handle) (string, error)
		Path(id string, kind namespaces.Kind) (string, bool)
		Release(id string) error
		IDs() ([]string, error)
	}
)

// discardTimeout bounds the clean-up of a container the shim will not keep.
const discardTimeout = 30 * time.Second

// targeter is what the shim does besides forwarding: it resolves targets,
// opens and pins their namespaces, points new containers' specs at the
// pins, checks them at start and releases them. Its hooks (container_*.go,
// sandbox_remove.go) see a request as bytes and a function that forwards
// bytes; nothing here knows how calls arrive. The dependencies are set
// by newServer and never change; state lives on disk (pins, intent records)
// and in containerd. The only in-memory state is which records belong to
// creates in flight (flights), so that the reconciler leaves them alone.
type targeter struct {
	cri     backendCRI
	tasks   taskLookup
	specs   specEditor
	pins    pinStore
	openNS  func(pid int, kinds []namespaces.Kind, verify func() error) ([]*namespaces.Handle, error)
	hasInit func(path string) (bool, error)
	canJoin func(h *namespaces.Handle, userns string) (bool, error)
	nri     *nriPlugin    // nil: the Update path only
	lookup  criContainers // nil: targets are resolved through the CRI only
	nriOnly bool          // refuse TARGET creates while NRI is not usable
	strict  bool
	log     *logrus.Entry
	metrics Metrics // nil: none
	intents intentStore

	// life ends when the server shuts down (reconciler loops stop).
	life        context.Context
	stop        context.CancelFunc
	reconcileMu sync.Mutex // one reconcile at a time; before flights.mu
	flights     flights
	// pinning holds the containers pinned in an NRI event whose create is
	// still in flight: containerd does not list them yet, and releaseStale
	// must leave their pins alone.
	pinning flights
}

// outcome is what targeting decided for one CreateContainer. It is owned
// by the create's handler, except from the NRI event's claim to its answer
// (adjust runs on the NRI stub's goroutine); nriPlugin.settle hands it back
// only once the answer is done, never on a timeout alone.
type outcome struct {
	name    string // the new container's name, for messages
	rec     oci.Record
	handles []*namespaces.Handle // open target namespaces, until pinned
	shm     *namespaces.Handle   // the target's /dev/shm, opened with an ipc namespace
	pid     uint32               // the target's pid the handles were opened through
	fails   []failure            // fallbacks, in the order they were decided
	// podShm is the /dev/shm mount the backend gave the container, when
	// the spec was pointed at the target's instead: what unpoint restores.
	podShm *specs.Mount
	// sandbox is the target's (and so the new container's) sandbox id, in full.
	sandbox string
	// held: the pins are made for container heldFor (by an NRI answer).
	held    bool
	heldFor string
	pinning string // the container pinned in an NRI event, while its create is in flight
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

// prepare resolves the target and opens its namespaces. Errors are the
// caller's (InvalidArgument, NotFound, FailedPrecondition); whatever keeps
// targeting from being honoured otherwise becomes a fallback in the outcome.
func (t *targeter) prepare(ctx context.Context, req criwire.Create, p *plan) (*outcome, error) {
	o := &outcome{name: req.Name, rec: oci.Record{Target: p.target, Namespaces: map[string]oci.NamespaceRecord{}}}
	for _, u := range p.unknown {
		o.fallBack(u.kind, "create", reasonUnknownMode, codes.InvalidArgument,
			fmt.Sprintf("unknown NamespaceMode %d for the %s namespace (known: POD, CONTAINER, NODE, TARGET)", u.mode, u.kind))
	}
	if len(p.kinds) == 0 {
		return o, nil
	}
	// The target's pid is asked for while the target is resolved: target_id
	// is the full id but for a prefix, which means asking again.
	type pidAnswer struct {
		pid uint32
		err error
	}
	early := make(chan pidAnswer, 1)
	go func() {
		pid, err := t.tasks.TaskPID(ctx, p.target)
		early <- pidAnswer{pid, err}
	}()
	tc, err := t.resolveTarget(ctx, req, p.target)
	if err != nil {
		return nil, err
	}
	o.rec.Target, o.sandbox = tc.GetId(), tc.GetPodSandboxId()
	fail := func(why reasonKind, code codes.Code, reason string) (*outcome, error) {
		for _, k := range p.kinds {
			o.fallBack(string(k), "create", why, code, reason)
		}
		return o, nil
	}
	if st := tc.GetState(); st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return fail(reasonTargetNotRunning, codes.FailedPrecondition, fmt.Sprintf("target is %s, not running", st))
	}
	a := <-early
	if tc.GetId() != p.target {
		a.pid, a.err = t.tasks.TaskPID(ctx, tc.GetId())
	}
	pid, err := a.pid, a.err
	if err != nil {
		why := whyNoPID(err)
		if why == reasonTargetNotRunning {
			// containerd's metadata knows the container, but it has no
			// running task: it exited (or never started).
			return fail(why, codes.FailedPrecondition, fmt.Sprintf("target is not running: containerd has no running task for it (%v)", err))
		}
		return fail(why, codeOf(err), fmt.Sprintf("find the target's process: %v", err))
	}
	// No verify here: the pid is confirmed (confirmPID) while the backend
	// creates the container, still after the namespaces were opened.
	// IPC means the target's /dev/shm too: it is opened in the same
	// pidfd-checked step, so it is the target's for the same reasons.
	kinds := p.kinds
	if slices.Contains(kinds, namespaces.IPC) {
		kinds = append(slices.Clip(kinds), namespaces.Shm)
	}
	hs, err := t.openNS(int(pid), kinds, nil)
	if err != nil {
		return fail(whyNoNamespace(err), codeOf(err), fmt.Sprintf("open the target's namespaces: %v", err))
	}
	o.pid = pid
	for _, h := range hs {
		if h.Kind == namespaces.Shm {
			o.shm = h
			continue
		}
		o.handles = append(o.handles, h)
		o.rec.Namespaces[string(h.Kind)] = oci.NamespaceRecord{Result: oci.Targeted, Stage: "create", Inode: h.ID.Ino}
	}
	return o, nil
}

// confirmPID asks containerd again for the target's pid, after its
// namespaces were opened through pid (namespaces.Open's last step): the same
// pid means the process opened was the target's.
func (t *targeter) confirmPID(ctx context.Context, target string, pid uint32) error {
	again, err := t.tasks.TaskPID(ctx, target)
	if err != nil {
		return fmt.Errorf("verify pid %d: %w", pid, err)
	}
	if again != pid {
		return fmt.Errorf("verify pid %d: target's task pid changed from %d to %d", pid, pid, again)
	}
	return nil
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

// resolveTarget finds the target, also resolving an unambiguous id prefix
// to the full id, and checks that it is in the request's pod.
func (t *targeter) resolveTarget(ctx context.Context, req criwire.Create, id string) (*runtimeapi.Container, error) {
	name, sandbox := req.Name, req.SandboxID
	tc, err := t.findTarget(ctx, name, id)
	if err != nil {
		return nil, err
	}
	if tc == nil {
		return nil, notFoundf("container %q in pod sandbox %q: target container %q not found", name, sandbox, id)
	}
	same, err := t.samePod(ctx, sandbox, tc.GetPodSandboxId())
	if err != nil {
		return nil, fmt.Errorf("container %q: resolve pod sandbox %q: %w", name, sandbox, err)
	}
	if !same {
		return nil, preconditionf("container %q in pod sandbox %q: target container %q belongs to pod sandbox %q; a container can only target a container of its own pod",
			name, sandbox, tc.GetId(), tc.GetPodSandboxId())
	}
	return tc, nil
}

// findTarget looks the target up (nil: there is none). A full id is looked
// up in containerd's own metadata, one read where the CRI's ListContainers
// costs more; whether it runs is then the task's to say (TaskPID). An id
// prefix, or containerd's API failing, goes through the backend's CRI.
func (t *targeter) findTarget(ctx context.Context, name, id string) (*runtimeapi.Container, error) {
	if t.lookup != nil && isFullID(id) {
		pod, err := t.lookup.CRIContainer(ctx, id)
		switch {
		case errors.Is(err, errNotCRIContainer):
			return nil, nil
		case err == nil:
			// RUNNING as far as the CRI goes: the task's state decides
			return &runtimeapi.Container{Id: id, PodSandboxId: pod, State: runtimeapi.ContainerState_CONTAINER_RUNNING}, nil
		}
		t.log.WithError(err).WithField("target", id).Debug("resolve the target through containerd's API; through its CRI instead")
	}
	resp, err := t.cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: id}})
	if err != nil {
		return nil, fmt.Errorf("container %q: resolve target %q: %w", name, id, err)
	}
	switch cs := resp.GetContainers(); len(cs) {
	case 0:
		return nil, nil
	case 1:
		return cs[0], nil
	default:
		return nil, invalidf("container %q: target_id %q matches %d containers; give the full id", name, id, len(cs))
	}
}

// isFullID: 64 lowercase hex digits, the ids containerd's CRI gives.
func isFullID(id string) bool {
	if len(id) != 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// samePod tells whether the sandbox id a request gave (in full, or as a
// unique prefix the backend resolves) is the target's sandbox, targetPod.
func (t *targeter) samePod(ctx context.Context, sandbox, targetPod string) (bool, error) {
	switch {
	case sandbox == "":
		return false, nil
	case sandbox == targetPod:
		return true, nil
	case !strings.HasPrefix(targetPod, sandbox):
		return false, nil
	}
	resp, err := t.cri.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{Filter: &runtimeapi.PodSandboxFilter{Id: sandbox}})
	if err != nil {
		return false, err
	}
	ps := resp.GetItems()
	return len(ps) == 1 && ps[0].GetId() == targetPod, nil
}

// finish pins the opened namespaces for the new container and records the
// outcome in its spec. The pins are made while the spec is pointed at them:
// their paths follow from the id, and nothing can join them before
// CreateContainer answers. An error means the container must not be kept.
func (t *targeter) finish(ctx context.Context, id string, o *outcome) error {
	o.rec.Via = ViaUpdate
	held := make(chan error, 1)
	if !o.pinsWanted() {
		held <- nil
	} else if err := t.setPinPaths(id, o); err != nil {
		held <- err
	} else {
		go func() { held <- t.pins.Hold(id, o.handles) }()
	}
	refused := 0
	editErr := t.specs.EditSpec(ctx, id, func(spec *specs.Spec) ([]oci.Opt, error) {
		p := t.point(id, viewOfSpec(spec), o)
		refused = p.refused
		var opts []oci.Opt
		for kind, path := range p.ns {
			opts = append(opts, oci.WithNamespacePath(specs.LinuxNamespaceType(kind), path))
		}
		if p.shm != nil {
			opts = append(opts, oci.WithMount(*p.shm))
		}
		return append(opts, oci.WithRecord(o.rec)), nil
	})
	if holdErr := <-held; holdErr != nil {
		if rerr := t.pins.Release(id); rerr != nil {
			t.log.WithError(rerr).WithField("container", id).Warn("release pins")
		}
		podPaths := map[namespaces.Kind]string{}
		for _, h := range o.handles {
			if o.rec.Namespaces[string(h.Kind)].Result != oci.Targeted {
				continue // refused already: the spec was not pointed at it
			}
			podPaths[h.Kind] = o.rec.Namespaces[string(h.Kind)].PodPath
			o.fallBack(string(h.Kind), "create", reasonPinFailed, codes.FailedPrecondition, fmt.Sprintf("pin the target's namespace: %v", holdErr))
		}
		if err := t.strictErr(o); err != nil {
			return err
		}
		if editErr == nil {
			// the spec points at pins that are not there: back to the
			// pod's namespaces, with the reason
			if err := t.unpoint(ctx, id, o, podPaths); err != nil {
				for _, h := range o.handles {
					t.targeting(string(h.Kind), "create", resultRefused, whySpecNotUpdated(err))
				}
				return coded(codeOf(err), "container %q (%s): pinning the target's namespaces failed (%v), and pointing its spec back at the pod's failed: %w", o.name, id, holdErr, err)
			}
			t.report(id, o)
			return nil
		}
	}
	if editErr == nil && refused > 0 {
		if err := t.strictErr(o); err != nil {
			return err
		}
		if refused == len(o.handles) {
			// nothing joins a pin: none is kept
			if rerr := t.pins.Release(id); rerr != nil {
				t.log.WithError(rerr).WithField("container", id).Warn("release pins")
			}
		}
	}
	if editErr != nil {
		if t.strict {
			for kind := range o.rec.Namespaces {
				t.targeting(kind, "create", resultRefused, whySpecNotUpdated(editErr))
			}
			return coded(codeOf(editErr), "container %q (%s): strict targeting: point its spec at target %q: %w", o.name, id, o.rec.Target, editErr)
		}
		// The backend made the container in the pod's namespaces: that is the
		// fallback, without the annotation that could not be written.
		for kind, r := range o.rec.Namespaces {
			if r.Result == oci.Targeted {
				o.fallBack(kind, "create", whySpecNotUpdated(editErr), codeOf(editErr), fmt.Sprintf("update the container's spec: %v", editErr))
			}
		}
		if rerr := t.pins.Release(id); rerr != nil {
			t.log.WithError(rerr).WithField("container", id).Warn("release pins")
		}
	}
	t.report(id, o)
	return nil
}

// adjust answers containerd's NRI CreateContainer event for c, the
// container the backend is making for o: it waits for the target's pid to
// be confirmed, pins, decides (point) and returns the adjustment, which
// containerd applies inside its CreateContainer. An error (strict mode)
// makes containerd refuse the create: nothing is left, no pin either.
func (t *targeter) adjust(c *nriapi.Container, o *outcome, confirm func() error) (*nriapi.ContainerAdjustment, error) {
	failpoint("create:nri-event")
	id := c.GetId()
	if confirm() != nil {
		if err := t.strictErr(o); err != nil {
			return nil, err
		}
	}
	if len(o.handles) > 0 {
		t.pinning.add(id) // until createContainer returns (o.pinning)
		o.pinning = id
		err := t.setPinPaths(id, o)
		if err == nil {
			err = t.pins.Hold(id, o.handles)
		}
		if err != nil {
			for _, h := range o.handles {
				o.fallBack(string(h.Kind), "create", reasonPinFailed, codes.FailedPrecondition, fmt.Sprintf("pin the target's namespace: %v", err))
			}
			if err := t.strictErr(o); err != nil {
				return nil, err
			}
		} else {
			o.held, o.heldFor = true, id
		}
	}
	o.rec.Via = ViaNRI
	p := t.point(id, viewOfNRI(c), o)
	if p.refused > 0 {
		if err := t.strictErr(o); err != nil {
			t.releasePins(id)
			return nil, err
		}
		if p.refused == len(o.handles) {
			t.releasePins(id) // nothing joins a pin: none is kept
			o.held = false
		}
	}
	adj := &nriapi.ContainerAdjustment{}
	for kind, path := range p.ns {
		adj.AddOrReplaceNamespace(&nriapi.LinuxNamespace{Type: kind, Path: path})
	}
	if m := p.shm; m != nil {
		adj.AddMount(&nriapi.Mount{Destination: m.Destination, Type: m.Type, Source: m.Source, Options: m.Options})
	}
	rec, err := o.rec.Encode()
	if err != nil {
		t.releasePins(id)
		return nil, err
	}
	adj.AddAnnotation(oci.AnnotationTargeting, rec)
	return adj, nil
}

func (t *targeter) releasePins(id string) {
	if err := t.pins.Release(id); err != nil {
		t.log.WithError(err).WithField("container", id).Warn("release pins")
	}
}

// viewOfNRI is the NRI event's copy of the container's spec.
func viewOfNRI(c *nriapi.Container) specView {
	v := specView{ns: map[string]string{}}
	for _, n := range c.GetLinux().GetNamespaces() {
		v.ns[n.GetType()] = n.GetPath()
	}
	for _, m := range c.GetMounts() {
		v.mounts = append(v.mounts, specs.Mount{Destination: m.GetDestination(), Type: m.GetType(), Source: m.GetSource(), Options: m.GetOptions()})
	}
	return v
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

// specView is what targeting reads of the container the backend made: its
// stored spec (the Update path) or the NRI event's copy of it.
type specView struct {
	ns     map[string]string // namespace type -> path ("" for a new one)
	mounts []specs.Mount
}

func viewOfSpec(s *specs.Spec) specView {
	v := specView{ns: map[string]string{}, mounts: s.Mounts}
	if s.Linux != nil {
		for _, n := range s.Linux.Namespaces {
			v.ns[string(n.Type)] = n.Path
		}
	}
	return v
}

// pointing is what targeting writes into the container: the namespaces it
// joins (type -> pin) and the /dev/shm mount that replaces the backend's.
type pointing struct {
	ns      map[string]string
	shm     *specs.Mount
	refused int // namespaces whose join the kernel would refuse
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
			p.refused++
			continue
		}
		p.ns[kind] = r.Path
	}
	if r, ok := o.rec.Namespaces[string(namespaces.IPC)]; ok && r.Result == oci.Targeted {
		p.shm = t.shareIPC(id, v.mounts, o)
	}
	return p
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
	o.podShm = &specs.Mount{Destination: pod.Destination, Type: pod.Type, Source: pod.Source, Options: slices.Clone(pod.Options)}
	r.Shares, r.Shm = append(r.Shares, "shm"), path
	return &m
}

// unpoint points the namespaces the spec was pointed at (now fallbacks in
// o) back at the pod's, podPaths, and records why.
func (t *targeter) unpoint(ctx context.Context, id string, o *outcome, podPaths map[namespaces.Kind]string) error {
	return t.specs.EditSpec(ctx, id, func(spec *specs.Spec) ([]oci.Opt, error) {
		var opts []oci.Opt
		if o.podShm != nil {
			opts = append(opts, oci.WithMount(*o.podShm))
		}
		for kind, path := range podPaths {
			if path == "" {
				return nil, fmt.Errorf("no pod %s namespace recorded to fall back to", kind)
			}
			opts = append(opts, oci.WithNamespacePath(specs.LinuxNamespaceType(kind), path))
		}
		return append(opts, oci.WithRecord(o.rec)), nil
	})
}

// strictErr is the error strict mode answers the first fallback with.
func (t *targeter) strictErr(o *outcome) error {
	if !t.strict || len(o.fails) == 0 {
		return nil
	}
	for _, f := range o.fails {
		t.targeting(f.kind, "create", resultRefused, f.why)
	}
	f := o.fails[0]
	return coded(f.code, "container %q: strict targeting: the %s namespace of target %q cannot be joined: %s", o.name, f.kind, o.rec.Target, f.reason)
}

// report logs the outcome: one line per targeted container, one warning per
// fallback, each naming both containers.
func (t *targeter) report(id string, o *outcome) {
	log := t.log.WithFields(logrus.Fields{"container": id, "name": o.name, "target": o.rec.Target, "via": o.rec.Via})
	for _, f := range o.fails {
		t.targeting(f.kind, "create", oci.Fallback, f.why)
		log.WithFields(logrus.Fields{"namespace": f.kind, "reason": f.reason, "reason_kind": f.why}).Warn("targeting fell back to the pod's namespace")
	}
	for kind, r := range o.rec.Namespaces {
		if r.Result == oci.Targeted {
			t.targeting(kind, "create", oci.Targeted, reasonNone)
			log.WithFields(logrus.Fields{"namespace": kind, "inode": r.Inode, "pin": r.Path}).Info("container joins the target's namespace")
		}
	}
}

// codeOf picks the code for a failure to reach the target: Unavailable when
// containerd did not answer, FailedPrecondition otherwise.
func codeOf(err error) codes.Code {
	if status.Code(err) == codes.Unavailable || errors.Is(err, context.DeadlineExceeded) {
		return codes.Unavailable
	}
	return codes.FailedPrecondition
}

func (t *targeter) checkPID(ctx context.Context, id, pin string) error {
	live, err := t.hasInit(pin)
	if err == nil && live {
		return nil
	}
	reason, why := "the target's PID namespace has no init left (the target exited after create)", reasonNamespaceGone
	if err != nil {
		reason, why = fmt.Sprintf("check the target's PID namespace: %v", err), reasonPinFailed
	}
	if t.strict {
		t.targeting(string(namespaces.PID), "start", resultRefused, why)
		t.discardID(ctx, id)
		return preconditionf("container %q: strict targeting: %s; the container was removed", id, reason)
	}
	var target string
	err = t.specs.EditSpec(ctx, id, func(spec *specs.Spec) ([]oci.Opt, error) {
		rec, ok, err := oci.ParseRecord(spec.Annotations)
		if err != nil {
			return nil, err
		}
		r := rec.Namespaces[string(namespaces.PID)]
		if !ok || r.PodPath == "" {
			return nil, fmt.Errorf("no pod PID namespace recorded to fall back to")
		}
		target = rec.Target
		r.Result, r.Stage, r.Reason, r.ReasonKind = oci.Fallback, "start", reason, string(why)
		rec.Namespaces[string(namespaces.PID)] = r
		return []oci.Opt{oci.WithNamespacePath(specs.PIDNamespace, r.PodPath), oci.WithRecord(rec)}, nil
	})
	if err != nil {
		t.targeting(string(namespaces.PID), "start", resultRefused, whySpecNotUpdated(err))
		return preconditionf("container %q: %s, and falling back to the pod's PID namespace failed: %w", id, reason, err)
	}
	t.targeting(string(namespaces.PID), "start", oci.Fallback, why)
	t.log.WithFields(logrus.Fields{"container": id, "target": target, "namespace": "pid", "reason": reason, "reason_kind": why}).
		Warn("targeting fell back to the pod's namespace at start")
	return nil
}

// targeting reports one targeting decision to the metrics, if any.
func (t *targeter) targeting(namespace, stage, result string, why reasonKind) {
	if t.metrics != nil {
		t.metrics.Targeting(namespace, stage, result, string(why))
	}
}

// releaseStale releases the pins of containers the backend no longer has.
// The pin list is read before the backend's container list, so a pin made
// for a container created meanwhile is never taken for stale.
func (t *targeter) releaseStale(ctx context.Context) error {
	ids, err := t.pins.IDs()
	if err != nil || len(ids) == 0 {
		return err
	}
	// Pinned in an NRI event, not listed by the backend until its create
	// returns. Taken before the list: a pin of a create not in flight now is
	// of a container the list below has, or had.
	inFlight := map[string]bool{}
	for _, id := range ids {
		inFlight[id] = t.pinning.has(id)
	}
	resp, err := t.cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{})
	if err != nil {
		return fmt.Errorf("release stale pins: list backend containers: %w", err)
	}
	live := make(map[string]bool, len(resp.GetContainers()))
	for _, c := range resp.GetContainers() {
		live[c.GetId()] = true
	}
	var errs []error
	for _, id := range ids {
		if live[id] || inFlight[id] {
			continue
		}
		if err := t.pins.Release(id); err != nil {
			// one pin that cannot be released does not keep the others
			t.log.WithError(err).WithField("container", id).Warn("release pins of a container the backend no longer has")
			errs = append(errs, err)
			continue
		}
		t.log.WithField("container", id).Info("released pins of a container the backend no longer has")
	}
	return errors.Join(errs...)
}
