// Package deploy holds the cluster install's manifests (install/, and
// cleanup/ over it; docs/cluster-install.md) and what they may not ask for:
// LeastPrivilege, which this directory's test runs on install/ and the Helm
// chart's test (hack/chart) on the chart's render, so that both are held to
// the one list below. The plugin mode's pod (plugin/) is held to its own
// lists by PluginLeastPrivilege (plugin_privilege.go), on its files here
// and on what kustomize builds of them in hack/chart's test.
package deploy

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// hostPaths are the host paths the installer may mount (each at
// /host/<path>), and whether read-only; docs/cluster-install.md says why.
var hostPaths = map[string]bool{
	"/usr/local/bin":          false,
	"/etc":                    false,
	"/var/lib":                false,
	"/run":                    false,
	"/var/run":                true,
	"/usr/lib/systemd/system": true,
	"/lib/systemd/system":     true,
	"/proc":                   true,
}

// capabilities the installer's container may add: none
// (installer/mounts: the pins are released by systemd).
var capabilities []corev1.Capability

// tolerated are the taints of a node being set up.
var tolerated = []string{
	"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable", "node.kubernetes.io/network-unavailable",
	"node.kubernetes.io/disk-pressure", "node.kubernetes.io/memory-pressure", "node.kubernetes.io/pid-pressure",
	"node.kubernetes.io/unschedulable", "node.cloudprovider.kubernetes.io/uninitialized",
}

// Object is one object of an install's manifests.
type Object struct {
	Source string // the file it came from, for the messages
	Kind   string
	Raw    []byte // its YAML
}

// Split reads the objects of source's YAML documents (b), leaving out the
// empty ones.
func Split(source string, b []byte) ([]Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var out []Object
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("%s: %w", source, err)
		}
		if meta.Kind != "" {
			out = append(out, Object{source, meta.Kind, doc})
		}
	}
}

// problems collects what LeastPrivilege finds.
type problems []error

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Errorf(format, args...)) }

// LeastPrivilege lists what the install's objects ask for beyond what the
// installer needs: a token Secret that never expires, a privileged or
// capable container, a host path not in the list above (the host's / above
// all), a toleration of every taint or of a taint a node being set up does
// not carry, a system priority class, an admission policy that does not
// hold the installer's service account to its own Node. Nil when nothing.
func LeastPrivilege(objs []Object) []error {
	var p problems
	p.checkSecrets(objs)
	ds, err := only[appsv1.DaemonSet](objs, "DaemonSet")
	if err != nil {
		return append(p, err)
	}
	spec := ds.Spec.Template.Spec
	if spec.HostPID || spec.HostIPC {
		p.add("hostPID %v, hostIPC %v: want neither", spec.HostPID, spec.HostIPC)
	}
	if spec.AutomountServiceAccountToken != nil && !*spec.AutomountServiceAccountToken {
		p.add("automountServiceAccountToken is false: the installer's identity is its projected token")
	}
	p.checkVolumes(spec)
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		p.checkContainer(c, installer)
	}
	p.checkTolerations(spec.Tolerations)
	p.checkPriority(objs, spec)
	p.checkAdmission(objs, ds)
	return p
}

// checkSecrets finds the Secrets that hold a service account's token,
// which never expires.
func (p *problems) checkSecrets(objs []Object) {
	for _, o := range objs {
		if o.Kind != "Secret" {
			continue
		}
		if s, err := decode[corev1.Secret](o); err != nil {
			*p = append(*p, err)
		} else if s.Type == corev1.SecretTypeServiceAccountToken {
			p.add("%s: a Secret of type %s (a token that never expires)", o.Source, corev1.SecretTypeServiceAccountToken)
		}
	}
}

func decode[T any](o Object) (T, error) {
	var v T
	if err := yaml.UnmarshalStrict(o.Raw, &v); err != nil {
		return v, fmt.Errorf("%s (%s): %w", o.Source, o.Kind, err)
	}
	return v, nil
}

func only[T any](objs []Object, kind string) (T, error) {
	var found []Object
	for _, o := range objs {
		if o.Kind == kind {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		var zero T
		return zero, fmt.Errorf("%d objects of kind %s, want 1", len(found), kind)
	}
	return decode[T](found[0])
}

func (p *problems) checkVolumes(spec corev1.PodSpec) {
	mounted := map[string]bool{}
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		hp := path.Clean(v.HostPath.Path)
		ro, listed := hostPaths[hp]
		switch {
		case hp == "/":
			p.add("volume %s: the host's root", v.Name)
		case !listed:
			p.add("volume %s: host path %s is not one the installer needs", v.Name, hp)
		}
		mounted[hp] = true
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			for _, m := range c.VolumeMounts {
				if m.Name == v.Name {
					p.checkMount(c.Name, hp, ro, m)
				}
			}
		}
	}
	for hp := range hostPaths {
		if !mounted[hp] {
			p.add("host path %s is listed here but not mounted: the list is stale", hp)
		}
	}
}

func (p *problems) checkMount(container, hp string, ro bool, m corev1.VolumeMount) {
	if m.MountPath != path.Join("/host", hp) || m.SubPath != "" {
		p.add("%s mounts %s at %s (subPath %q): want /host%s, where installer/hostfs finds it", container, hp, m.MountPath, m.SubPath, hp)
	}
	if ro && !m.ReadOnly {
		p.add("%s mounts %s read-write: the installer only reads it", container, hp)
	}
	if m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional {
		p.add("%s mounts %s with Bidirectional propagation (privileged only)", container, hp)
	}
	// The shim's pins are mounts under /run (also /var/run, its symbolic
	// link): a copy of it without the host's unmounts keeps a released pin
	// mounted in the pod, and its removal fails (EBUSY), as seen on the
	// node test's cleanup.
	if (hp == "/run" || hp == "/var/run") && (m.MountPropagation == nil || *m.MountPropagation != corev1.MountPropagationHostToContainer) {
		p.add("%s mounts %s without HostToContainer propagation: the pins released on the host stay mounted in the pod", container, hp)
	}
}

// containerPolicy is what one pod's containers may ask for: the
// capabilities its program uses (who: the program, for the messages), and
// whether it may be privileged (a reason; "": never).
type containerPolicy struct {
	who          string
	capabilities []corev1.Capability
	privileged   func(corev1.Container) string
}

var installer = containerPolicy{who: "the installer", capabilities: capabilities,
	privileged: func(corev1.Container) string { return "" }}

func (p *problems) checkContainer(c corev1.Container, pol containerPolicy) {
	sc := c.SecurityContext
	if sc == nil {
		p.add("container %s has no securityContext", c.Name)
		return
	}
	privileged := sc.Privileged != nil && *sc.Privileged
	if privileged && pol.privileged(c) == "" {
		p.add("container %s is privileged", c.Name)
	}
	// Kubernetes refuses allowPrivilegeEscalation false with privileged.
	if !privileged && (sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation) {
		p.add("container %s: allowPrivilegeEscalation is not false", c.Name)
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		p.add("container %s: readOnlyRootFilesystem is not true", c.Name)
	}
	if sc.RunAsUser == nil || *sc.RunAsUser != 0 {
		p.add("container %s: runAsUser is not 0 (what it touches on the host is root's)", c.Name)
	}
	if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		p.add("container %s: seccompProfile is not RuntimeDefault", c.Name)
	}
	if sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		p.add("container %s: capabilities do not drop ALL", c.Name)
		return
	}
	for _, add := range sc.Capabilities.Add {
		if !slices.Contains(pol.capabilities, corev1.Capability(strings.TrimPrefix(string(add), "CAP_"))) {
			p.add("container %s adds %s, which %s does not use", c.Name, add, pol.who)
		}
	}
}

func (p *problems) checkTolerations(tolerations []corev1.Toleration) {
	for _, tol := range tolerations {
		if tol.Key == "" {
			p.add("toleration %+v tolerates every taint", tol)
		} else if !slices.Contains(tolerated, tol.Key) {
			p.add("toleration of %s: not a taint of a node being set up", tol.Key)
		}
	}
	for _, key := range tolerated {
		if !slices.ContainsFunc(tolerations, func(tol corev1.Toleration) bool { return tol.Key == key }) {
			p.add("no toleration of %s: the installer must run on a node that carries it", key)
		}
	}
}

func (p *problems) checkPriority(objs []Object, spec corev1.PodSpec) {
	pc, err := only[schedulingv1.PriorityClass](objs, "PriorityClass")
	if err != nil {
		*p = append(*p, err)
		return
	}
	if spec.PriorityClassName != pc.Name || strings.HasPrefix(spec.PriorityClassName, "system-") {
		p.add("priorityClassName %q, want the install's own (%q)", spec.PriorityClassName, pc.Name)
	}
	if pc.Value > 1000000000 {
		p.add("PriorityClass value %d: above what a class outside the system ones may have", pc.Value)
	}
}

func (p *problems) checkAdmission(objs []Object, ds appsv1.DaemonSet) {
	policy, err := only[admissionv1.ValidatingAdmissionPolicy](objs, "ValidatingAdmissionPolicy")
	if err != nil {
		*p = append(*p, err)
		return
	}
	binding, err := only[admissionv1.ValidatingAdmissionPolicyBinding](objs, "ValidatingAdmissionPolicyBinding")
	if err != nil {
		*p = append(*p, err)
		return
	}
	if binding.Spec.PolicyName != policy.Name || !slices.Contains(binding.Spec.ValidationActions, admissionv1.Deny) {
		p.add("the binding %+v does not deny with the policy %s", binding.Spec, policy.Name)
	}
	sa := "system:serviceaccount:" + ds.Namespace + ":" + ds.Spec.Template.Spec.ServiceAccountName
	if len(policy.Spec.MatchConditions) != 1 || !strings.Contains(policy.Spec.MatchConditions[0].Expression, "'"+sa+"'") {
		p.add("the policy does not match the installer's service account %s: %+v", sa, policy.Spec.MatchConditions)
	}
}
