package server

import (
	"context"
	"fmt"
	"slices"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"

	specs "github.com/opencontainers/runtime-spec/specs-go"
	"github.com/sirupsen/logrus"

	"github.com/cri-nstarget/cri-nstarget/criwire"
	"github.com/cri-nstarget/cri-nstarget/namespaces"
	"github.com/cri-nstarget/cri-nstarget/oci"
)

// startContainer checks, for a container with a pinned PID namespace, that
// the namespace can still be joined before the request goes to the backend
// unchanged. A PID namespace whose init has exited cannot take new processes:
// runc would fail with a cryptic error, so the shim falls back to the pod's
// namespace (or, strict, fails and removes the container). Once the backend
// has started a container with pins, the check that it joined them is
// queued (verifier): it runs after the answer, never before.
func (t *targeter) startContainer(ctx context.Context, raw []byte, fwd forwardFunc) ([]byte, error) {
	cid, err := criwire.ContainerID(raw)
	if err != nil {
		// not protobuf: the backend answers it as it would directly
		return fwd(ctx, raw)
	}
	id, err := t.pinnedID(ctx, cid)
	if err != nil {
		return nil, err
	}
	if id == "" {
		return fwd(ctx, raw)
	}
	out, err := t.startPinned(ctx, id, raw, fwd)
	if err == nil {
		t.after.started(id)
	}
	return out, err
}

// startPinned is the start of container id, which has pins.
func (t *targeter) startPinned(ctx context.Context, id string, raw []byte, fwd forwardFunc) ([]byte, error) {
	path, pinned := t.pins.Path(id, namespaces.PID)
	if !pinned {
		return fwd(ctx, raw)
	}
	if live, err := t.hasInit(path); err != nil || !live {
		// falls back (the spec no longer names the pin), or refuses
		if err := t.initLost(ctx, id, err); err != nil {
			return nil, err
		}
		return fwd(ctx, raw)
	}
	out, err := fwd(ctx, raw)
	if err != nil {
		return nil, t.startFailed(ctx, id, path, err)
	}
	return out, nil
}

// startFailed is the answer to a start of container id, which joins the
// PID namespace pinned at pin, that the backend failed with err. When the
// namespace has lost its init meanwhile (the target exited during the
// start: runc cannot fork into it, "Cannot allocate memory" or "procReady
// not received"), the cause is said, as FailedPrecondition with the reason
// namespace_gone: the backend has marked the container exited, so there is
// no falling back to the pod's namespace any more. Strict mode removes the
// container, as at every refusal. Any other failure is the backend's,
// passed through unchanged.
func (t *targeter) startFailed(ctx context.Context, id, pin string, err error) error {
	if live, herr := t.hasInit(pin); herr != nil || live {
		return err
	}
	why := reasonNamespaceGone
	t.report.targeting(string(namespaces.PID), "start", resultRefused, why)
	name, targetName := t.names(ctx, id)
	target, ref := targetNames(targetName)
	t.log.WithFields(logrus.Fields{"container": id, "namespace": "pid", "reason_kind": why, "backend_error": err.Error()}).
		Warn("the target exited while the container started in its PID namespace")
	removed := ""
	if t.strict {
		t.recon.discardID(ctx, id)
		removed = "; the container was removed"
	}
	return preconditionf("container %s could not start in the pid namespace of %s: %s exited while %s started, and its PID namespace has no process left (%s)%s",
		name, ref, target, name, why, removed)
}

// pinnedID resolves a container id as a client gave it, in full or as a
// unique prefix (crictl start 4f2a), to the full id of a container the shim
// holds pins for; "" when it names none. A full id costs no call: the pin
// directory answers. A prefix of a pinned id is resolved by the backend, as
// the backend itself would resolve it for the call.
func (t *targeter) pinnedID(ctx context.Context, id string) (string, error) {
	ids, err := t.pins.IDs()
	if err != nil {
		return "", fmt.Errorf("container %q: %w", id, err)
	}
	prefixed := false
	for _, p := range ids {
		if p == id {
			return id, nil
		}
		prefixed = prefixed || (id != "" && strings.HasPrefix(p, id))
	}
	if !prefixed {
		return "", nil
	}
	resp, err := t.cri.ListContainers(ctx, &runtimeapi.ListContainersRequest{Filter: &runtimeapi.ContainerFilter{Id: id}})
	if err != nil {
		return "", fmt.Errorf("container %q: resolve the id: %w", id, err)
	}
	if cs := resp.GetContainers(); len(cs) == 1 && slices.Contains(ids, cs[0].GetId()) {
		return cs[0].GetId(), nil
	}
	return "", nil // ambiguous, or not a pinned one: the backend answers the call itself
}

// initLost answers a start of container id, which would join a pinned
// PID namespace that has no init left (or whose check failed: err): the
// container falls back to the pod's PID namespace (its spec is pointed back
// at the pod's path its record kept) or, strict, is removed. Either way the
// pod gets a Warning Event, or the kubelet's own Failed one with the
// refusal.
func (t *targeter) initLost(ctx context.Context, id string, err error) error {
	reason, why := "the target's PID namespace has no init left (the target exited after create)", reasonNamespaceGone
	if err != nil {
		reason, why = fmt.Sprintf("check the target's PID namespace: %v", err), reasonPinFailed
	}
	if t.strict {
		t.report.targeting(string(namespaces.PID), "start", resultRefused, why)
		name, targetName := t.names(ctx, id)
		target, ref := targetNames(targetName)
		t.recon.discardID(ctx, id)
		return preconditionf("strict targeting: container %s cannot start in the pid namespace of %s: %s (%s: %s); the container was removed",
			name, ref, inWords(why, "start", target, name), why, reason)
	}
	var rec oci.Record
	var name string
	err = t.records.edit(ctx, id, func(spec *specs.Spec) ([]oci.Opt, error) {
		r, ok, err := oci.ParseRecord(spec.Annotations)
		if err != nil {
			return nil, err
		}
		ns := r.Namespaces[string(namespaces.PID)]
		if !ok || ns.PodPath == "" {
			return nil, fmt.Errorf("no pod PID namespace recorded to fall back to")
		}
		ns.Result, ns.Stage, ns.Reason, ns.ReasonKind = oci.Fallback, "start", reason, string(why)
		r.Namespaces[string(namespaces.PID)] = ns
		rec, name = r, spec.Annotations[criNameAnnotation]
		return []oci.Opt{oci.WithNamespacePath(specs.PIDNamespace, ns.PodPath), oci.WithRecord(r)}, nil
	})
	if err != nil {
		t.report.targeting(string(namespaces.PID), "start", resultRefused, whySpecNotUpdated(err))
		return preconditionf("container %q: %s, and falling back to the pod's PID namespace failed: %w", id, reason, err)
	}
	t.report.targeting(string(namespaces.PID), "start", oci.Fallback, why)
	t.log.WithFields(logrus.Fields{"container": id, "target": rec.Target, "namespace": "pid", "reason": reason, "reason_kind": why}).
		Warn("targeting fell back to the pod's namespace at start")
	t.report.event(name, "start", rec)
	return nil
}

// names are container id's name (or its id) and its target's ("" when not
// known), as its spec records them.
func (t *targeter) names(ctx context.Context, id string) (name, target string) {
	name = id
	spec, err := t.records.read(ctx, id)
	if err != nil {
		return name, ""
	}
	if n := spec.Annotations[criNameAnnotation]; n != "" {
		name = n
	}
	r, _, _ := oci.ParseRecord(spec.Annotations)
	return name, r.TargetName
}
