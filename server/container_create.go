package server

import (
	"context"
	"errors"
	"fmt"
	"strings"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// outcome is what targeting decided for one CreateContainer.
type outcome struct {
	name    string // the new container's name, for messages
	rec     oci.Record
	handles []*namespaces.Handle // open target namespaces, until pinned
	pid     uint32               // the target's pid the handles were opened through
	fails   []failure            // fallbacks, in the order they were decided
}

// failure is one fallback, with the code strict mode answers it with.
type failure struct {
	kind   string
	code   codes.Code
	reason string
	why    reasonKind // reason, from a fixed set (metrics, logs)
}

func (o *outcome) fallBack(kind string, stage string, why reasonKind, code codes.Code, reason string) {
	o.rec.Namespaces[kind] = oci.NamespaceRecord{Result: oci.Fallback, Stage: stage, Reason: reason}
	o.fails = append(o.fails, failure{kind: kind, code: code, reason: reason, why: why})
}

func (o *outcome) close() {
	for _, h := range o.handles {
		h.Close()
	}
}

// createContainer handles CreateContainer: requests without TARGET (or an
// unknown NamespaceMode) go to the backend byte for byte. Otherwise the target
// is resolved and its namespaces opened before anything is created, the
// request is forwarded with POD in place of TARGET, and the new container's
// spec is pointed at pins of the target's namespaces.
func (s *Server) createContainer(ctx context.Context, raw []byte, fwd forwardFunc) ([]byte, error) {
	req := new(runtimeapi.CreateContainerRequest)
	if err := proto.Unmarshal(raw, req); err != nil {
		return nil, invalidf("malformed CreateContainerRequest: %w", err)
	}
	p, err := planFor(req)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return fwd(ctx, raw)
	}
	o, err := s.prepare(ctx, req, p)
	if err != nil {
		return nil, err
	}
	defer o.close()
	if err := s.strictErr(o); err != nil {
		return nil, err
	}
	setPodModes(req)
	b, err := proto.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("encode CreateContainerRequest: %w", err)
	}
	// The pid the namespaces were opened through is confirmed with
	// containerd while the backend creates the container: nothing joins
	// them before CreateContainer answers, and the answer waits for it.
	confirmed := make(chan error, 1)
	if len(o.handles) > 0 {
		go func() { confirmed <- s.confirmPID(ctx, o.rec.Target, o.pid) }()
	} else {
		confirmed <- nil
	}
	out, err := fwd(ctx, b)
	if err != nil {
		return nil, err
	}
	resp := new(runtimeapi.CreateContainerResponse)
	if err := proto.Unmarshal(out, resp); err != nil || resp.GetContainerId() == "" {
		return nil, fmt.Errorf("container %q: backend CreateContainer answered without a container id (%v)", o.name, err)
	}
	if err := <-confirmed; err != nil {
		o.unconfirmed(err)
		if err := s.strictErr(o); err != nil {
			s.discard(ctx, resp.GetContainerId())
			return nil, err
		}
	}
	if err := s.finish(ctx, resp.GetContainerId(), o); err != nil {
		s.discard(ctx, resp.GetContainerId())
		return nil, err
	}
	return out, nil
}

// prepare resolves the target and opens its namespaces. Errors are the
// caller's (InvalidArgument, NotFound, FailedPrecondition); whatever keeps
// targeting from being honoured otherwise becomes a fallback in the outcome.
func (s *Server) prepare(ctx context.Context, req *runtimeapi.CreateContainerRequest, p *plan) (*outcome, error) {
	o := &outcome{name: containerName(req), rec: oci.Record{Target: p.target, Namespaces: map[string]oci.NamespaceRecord{}}}
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
		pid, err := s.tasks.TaskPID(ctx, p.target)
		early <- pidAnswer{pid, err}
	}()
	t, err := s.resolveTarget(ctx, req, p.target)
	if err != nil {
		return nil, err
	}
	o.rec.Target = t.GetId()
	fail := func(why reasonKind, code codes.Code, reason string) (*outcome, error) {
		for _, k := range p.kinds {
			o.fallBack(string(k), "create", why, code, reason)
		}
		return o, nil
	}
	if st := t.GetState(); st != runtimeapi.ContainerState_CONTAINER_RUNNING {
		return fail(reasonTargetNotRunning, codes.FailedPrecondition, fmt.Sprintf("target is %s, not running", st))
	}
	a := <-early
	if t.GetId() != p.target {
		a.pid, a.err = s.tasks.TaskPID(ctx, t.GetId())
	}
	pid, err := a.pid, a.err
	if err != nil {
		return fail(whyNoPID(err), codeOf(err), fmt.Sprintf("find the target's process: %v", err))
	}
	// No verify here: the pid is confirmed (confirmPID) while the backend
	// creates the container, still after the namespaces were opened.
	hs, err := s.openNS(int(pid), p.kinds, nil)
	if err != nil {
		return fail(whyNoNamespace(err), codeOf(err), fmt.Sprintf("open the target's namespaces: %v", err))
	}
	o.handles, o.pid = hs, pid
	for _, h := range hs {
		o.rec.Namespaces[string(h.Kind)] = oci.NamespaceRecord{Result: oci.Targeted, Stage: "create", Inode: h.ID.Ino}
	}
	return o, nil
}

// confirmPID asks containerd again for the target's pid, after its
// namespaces were opened through pid (namespaces.Open's last step): the same
// pid means the process opened was the target's.
func (s *Server) confirmPID(ctx context.Context, target string, pid uint32) error {
	again, err := s.tasks.TaskPID(ctx, target)
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
	o.handles = nil
}

// resolveTarget finds the target through the backend's CRI, which also
// resolves an unambiguous id prefix to the full id.
func (s *Server) resolveTarget(ctx context.Context, req *runtimeapi.CreateContainerRequest, id string) (*runtimeapi.Container, error) {
	name, sandbox := containerName(req), req.GetPodSandboxId()
	resp, err := s.cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: id}})
	if err != nil {
		return nil, fmt.Errorf("container %q: resolve target %q: %w", name, id, err)
	}
	switch cs := resp.GetContainers(); {
	case len(cs) == 0:
		return nil, notFoundf("container %q in pod sandbox %q: target container %q not found", name, sandbox, id)
	case len(cs) > 1:
		return nil, invalidf("container %q: target_id %q matches %d containers; give the full id", name, id, len(cs))
	}
	t := resp.GetContainers()[0]
	if sandbox == "" || !strings.HasPrefix(t.GetPodSandboxId(), sandbox) {
		return nil, preconditionf("container %q in pod sandbox %q: target container %q belongs to pod sandbox %q; a container can only target a container of its own pod",
			name, sandbox, t.GetId(), t.GetPodSandboxId())
	}
	return t, nil
}

// finish pins the opened namespaces for the new container and records the
// outcome in its spec. The pins are made while the spec is pointed at them:
// their paths follow from the id, and nothing can join them before
// CreateContainer answers. An error means the container must not be kept.
func (s *Server) finish(ctx context.Context, id string, o *outcome) error {
	held := make(chan error, 1)
	if len(o.handles) == 0 {
		held <- nil
	} else if paths, err := s.pins.Paths(id, o.handles); err != nil {
		held <- err
	} else {
		for _, h := range o.handles {
			r := o.rec.Namespaces[string(h.Kind)]
			r.Path = paths[h.Kind]
			o.rec.Namespaces[string(h.Kind)] = r
		}
		go func() { held <- s.pins.Hold(id, o.handles) }()
	}
	editErr := s.specs.EditSpec(ctx, id, func(spec *specs.Spec) ([]oci.Opt, error) {
		var opts []oci.Opt
		for kind, r := range o.rec.Namespaces {
			if r.Result != oci.Targeted {
				continue
			}
			r.PodPath, _ = oci.NamespacePath(spec, specs.LinuxNamespaceType(kind))
			o.rec.Namespaces[kind] = r
			opts = append(opts, oci.WithNamespacePath(specs.LinuxNamespaceType(kind), r.Path))
		}
		return append(opts, oci.WithRecord(o.rec)), nil
	})
	if holdErr := <-held; holdErr != nil {
		if rerr := s.pins.Release(id); rerr != nil {
			s.log.WithError(rerr).WithField("container", id).Warn("release pins")
		}
		podPaths := map[namespaces.Kind]string{}
		for _, h := range o.handles {
			podPaths[h.Kind] = o.rec.Namespaces[string(h.Kind)].PodPath
			o.fallBack(string(h.Kind), "create", reasonPinFailed, codes.FailedPrecondition, fmt.Sprintf("pin the target's namespace: %v", holdErr))
		}
		if err := s.strictErr(o); err != nil {
			return err
		}
		if editErr == nil {
			// the spec points at pins that are not there: back to the
			// pod's namespaces, with the reason
			if err := s.unpoint(ctx, id, o, podPaths); err != nil {
				for _, h := range o.handles {
					s.targeting(string(h.Kind), "create", resultRefused, whySpecNotUpdated(err))
				}
				return coded(codeOf(err), "container %q (%s): pinning the target's namespaces failed (%v), and pointing its spec back at the pod's failed: %w", o.name, id, holdErr, err)
			}
			s.report(id, o)
			return nil
		}
	}
	if editErr != nil {
		if s.strict {
			for kind := range o.rec.Namespaces {
				s.targeting(kind, "create", resultRefused, whySpecNotUpdated(editErr))
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
		if rerr := s.pins.Release(id); rerr != nil {
			s.log.WithError(rerr).WithField("container", id).Warn("release pins")
		}
	}
	s.report(id, o)
	return nil
}

// unpoint points the namespaces the spec was pointed at (now fallbacks in
// o) back at the pod's, podPaths, and records why.
func (s *Server) unpoint(ctx context.Context, id string, o *outcome, podPaths map[namespaces.Kind]string) error {
	return s.specs.EditSpec(ctx, id, func(spec *specs.Spec) ([]oci.Opt, error) {
		var opts []oci.Opt
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
func (s *Server) strictErr(o *outcome) error {
	if !s.strict || len(o.fails) == 0 {
		return nil
	}
	for _, f := range o.fails {
		s.targeting(f.kind, "create", resultRefused, f.why)
	}
	f := o.fails[0]
	return coded(f.code, "container %q: strict targeting: the %s namespace of target %q cannot be joined: %s", o.name, f.kind, o.rec.Target, f.reason)
}

// report logs the outcome: one line per targeted container, one warning per
// fallback, each naming both containers.
func (s *Server) report(id string, o *outcome) {
	log := s.log.WithFields(logrus.Fields{"container": id, "name": o.name, "target": o.rec.Target})
	for _, f := range o.fails {
		s.targeting(f.kind, "create", oci.Fallback, f.why)
		log.WithFields(logrus.Fields{"namespace": f.kind, "reason": f.reason, "reason_kind": f.why}).Warn("targeting fell back to the pod's namespace")
	}
	for kind, r := range o.rec.Namespaces {
		if r.Result == oci.Targeted {
			s.targeting(kind, "create", oci.Targeted, reasonNone)
			log.WithFields(logrus.Fields{"namespace": kind, "inode": r.Inode, "pin": r.Path}).Info("container joins the target's namespace")
		}
	}
}

// discard removes a container the shim will not keep, and its pins.
func (s *Server) discard(ctx context.Context, id string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), discardTimeout)
	defer cancel()
	log := s.log.WithField("container", id)
	if _, err := s.cri.RemoveContainer(ctx, &runtimeapi.RemoveContainerRequest{ContainerId: id}); err != nil {
		log.WithError(err).Error("remove the container after a failed create or start; it is left in the backend")
	}
	if err := s.pins.Release(id); err != nil {
		log.WithError(err).Error("release pins")
	}
}

// setPodModes replaces TARGET and unknown modes with POD, so that the
// backend does nothing special.
func setPodModes(req *runtimeapi.CreateContainerRequest) {
	o := req.GetConfig().GetLinux().GetSecurityContext().GetNamespaceOptions()
	for _, m := range []*runtimeapi.NamespaceMode{&o.Pid, &o.Ipc, &o.Network} {
		switch *m {
		case runtimeapi.NamespaceMode_POD, runtimeapi.NamespaceMode_CONTAINER, runtimeapi.NamespaceMode_NODE:
		default:
			*m = runtimeapi.NamespaceMode_POD
		}
	}
	o.TargetId = ""
}

// codeOf picks the code for a failure to reach the target: Unavailable when
// containerd did not answer, FailedPrecondition otherwise.
func codeOf(err error) codes.Code {
	if status.Code(err) == codes.Unavailable || errors.Is(err, context.DeadlineExceeded) {
		return codes.Unavailable
	}
	return codes.FailedPrecondition
}
