package deploy

import (
	"path"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// pluginMount is how the plugin's pod must mount one host path: at the
// same path, read-only, with this propagation.
type pluginMount struct {
	propagation corev1.MountPropagationMode
}

// pluginHostPaths are the host paths the plugin may mount, each read-only
// (deploy/plugin/daemonset.yaml says why): NRI's socket directory;
// containerd's, whose containers' root file systems must leave the pod
// when containerd unmounts them (HostToContainer). Its state directory,
// the pins in it, is an emptyDir: its pins are mounts of its own mount
// namespace, which the host reaches through /proc/<pid>/root.
var pluginHostPaths = map[string]pluginMount{
	"/var/run/nri":    {propagation: corev1.MountPropagationNone},
	"/run/containerd": {propagation: corev1.MountPropagationHostToContainer},
}

// plugin is what the plugin's container may ask for: SYS_ADMIN (a pin's
// mount and unmount, in its own mount namespace) and SYS_PTRACE
// (/proc/<pid>/ns of processes with more capabilities); never privileged.
var plugin = containerPolicy{who: "the plugin", capabilities: []corev1.Capability{"SYS_ADMIN", "SYS_PTRACE"},
	privileged: func(corev1.Container) string { return "" }}

// pluginRules is what the plugin's identity may do: package events reads
// a pod, then creates its Event.
var pluginRules = map[string][]string{"pods": {"get"}, "events": {"create"}}

// pluginMemoryLimit bounds the plugin's memory limit: its RSS is at most
// 32 MiB, and the limit gives it headroom, no more.
var pluginMemoryLimit = resource.MustParse("64Mi")

// pluginNodeLabel is the label an operator sets on a node to run the
// plugin there.
const pluginNodeLabel = "cri-nstarget.io/plugin"

// PluginLeastPrivilege lists what the plugin mode's objects (deploy/plugin)
// ask for beyond what the plugin needs: a token that never expires or is
// mounted without expiring, the host's network or IPC, a privileged
// container, a capability it does not use, a host path not listed above or
// not mounted as listed (read-only), a mount with Bidirectional
// propagation (a mount of the pod's reaching the host), a toleration of every taint, an RBAC rule beyond pluginRules, no memory
// limit or one above pluginMemoryLimit, no node selector of its label.
// Nil when nothing.
func PluginLeastPrivilege(objs []Object) []error {
	var p problems
	p.checkSecrets(objs)
	ds, err := only[appsv1.DaemonSet](objs, "DaemonSet")
	if err != nil {
		return append(p, err)
	}
	spec := ds.Spec.Template.Spec
	if !spec.HostPID || spec.HostIPC || spec.HostNetwork {
		p.add("hostPID %v, hostIPC %v, hostNetwork %v: want the host's pids alone", spec.HostPID, spec.HostIPC, spec.HostNetwork)
	}
	if spec.NodeSelector[pluginNodeLabel] != "true" {
		p.add("nodeSelector %v: want %s=true, set by the operator", spec.NodeSelector, pluginNodeLabel)
	}
	for _, tol := range spec.Tolerations {
		if tol.Key == "" {
			p.add("toleration %+v tolerates every taint", tol)
		}
	}
	p.checkToken(objs, spec)
	p.checkPluginVolumes(spec)
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		p.checkContainer(c, plugin)
		if lim, ok := c.Resources.Limits[corev1.ResourceMemory]; !ok || lim.Cmp(pluginMemoryLimit) > 0 {
			p.add("container %s: memory limit %v, want one of at most %v", c.Name, c.Resources.Limits.Memory(), &pluginMemoryLimit)
		}
	}
	p.checkRules(objs)
	return p
}

// checkToken: the service account's token is not automounted (by its
// ServiceAccount nor the pod), and every one the pod projects expires.
func (p *problems) checkToken(objs []Object, spec corev1.PodSpec) {
	sa, err := only[corev1.ServiceAccount](objs, "ServiceAccount")
	if err != nil {
		*p = append(*p, err)
		return
	}
	if sa.Name != spec.ServiceAccountName || sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken ||
		spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		p.add("service account %s (the pod's: %s) or the pod automounts its token: want false on both", sa.Name, spec.ServiceAccountName)
	}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			p.add("volume %s: a Secret (the plugin's identity is its projected token)", v.Name)
		}
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			if t := src.ServiceAccountToken; t != nil && (t.ExpirationSeconds == nil || *t.ExpirationSeconds > 3600) {
				p.add("volume %s: a token expiring after %v s, want at most an hour", v.Name, t.ExpirationSeconds)
			}
		}
	}
}

// checkPluginVolumes: the host paths are those listed, mounted as listed;
// no mount propagates back to the host (Bidirectional).
func (p *problems) checkPluginVolumes(spec corev1.PodSpec) {
	for _, c := range append(spec.InitContainers, spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.MountPropagation != nil && *m.MountPropagation == corev1.MountPropagationBidirectional {
				p.add("%s mounts %s with Bidirectional propagation: its mounts would reach the host (the pins are the plugin's own)", c.Name, m.MountPath)
			}
		}
	}
	mounted := map[string]bool{}
	for _, v := range spec.Volumes {
		if v.HostPath == nil {
			continue
		}
		hp := path.Clean(v.HostPath.Path)
		want, listed := pluginHostPaths[hp]
		if !listed {
			p.add("volume %s: host path %s is not one the plugin needs", v.Name, hp)
		}
		mounted[hp] = true
		for _, c := range append(spec.InitContainers, spec.Containers...) {
			for _, m := range c.VolumeMounts {
				if m.Name != v.Name || !listed {
					continue
				}
				prop := corev1.MountPropagationNone
				if m.MountPropagation != nil {
					prop = *m.MountPropagation
				}
				if m.MountPath != hp || m.SubPath != "" || !m.ReadOnly || prop != want.propagation {
					p.add("%s mounts %s at %s (subPath %q, read-only %v, %s): want it at the same path, read-only, %s",
						c.Name, hp, m.MountPath, m.SubPath, m.ReadOnly, prop, want.propagation)
				}
			}
		}
	}
	for hp := range pluginHostPaths {
		if !mounted[hp] {
			p.add("host path %s is listed here but not mounted: the list is stale", hp)
		}
	}
}

// checkRules: every rule of every role grants no more than pluginRules.
func (p *problems) checkRules(objs []Object) {
	for _, o := range objs {
		var rules []rbacv1.PolicyRule
		switch o.Kind {
		case "ClusterRole":
			r, err := decode[rbacv1.ClusterRole](o)
			if err != nil {
				*p = append(*p, err)
			}
			rules = r.Rules
		case "Role":
			r, err := decode[rbacv1.Role](o)
			if err != nil {
				*p = append(*p, err)
			}
			rules = r.Rules
		}
		for _, r := range rules {
			if len(r.NonResourceURLs) > 0 || !slices.Equal(r.APIGroups, []string{""}) {
				p.add("%s: a rule of API groups %q, URLs %v: more than the plugin's Events need (%v)", o.Source, r.APIGroups, r.NonResourceURLs, pluginRules)
				continue
			}
			for _, res := range r.Resources {
				for _, verb := range r.Verbs {
					if !slices.Contains(pluginRules[res], verb) {
						p.add("%s: %s %s: more than the plugin's Events need (%v)", o.Source, verb, res, pluginRules)
					}
				}
			}
		}
	}
}
