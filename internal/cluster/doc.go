// Package cluster runs a single-node Kubernetes control plane on 127.0.0.1
// for end-to-end tests (make e2e): etcd, kube-apiserver and a kubelet whose
// container runtime is a given CRI endpoint (cri-nstarget, in front of a
// private containerd started with internal/harness).
//
// Each run makes its own CA and certificates (apiserver serving, cluster
// admin, the apiserver's kubelet client, the kubelet's serving and client
// certificates) and its own cgroup root, so that everything the kubelet and
// the runtime create for pods sits below one cgroup per hierarchy. By
// default no scheduler or controller manager runs: pods name the node, and
// mount no service-account token. With Options.Controllers both run (from
// the same Bin, for Kubernetes' own e2e specs: e2e/upstream), and the
// ServiceAccount admission plugin is on.
//
// Stop deletes the pods through the kubelet and stops the components by
// PID; Close (after the runtime has stopped) unmounts what the kubelet
// mounted under Options.Dir, removes the cgroups, and removes the few paths
// the kubelet makes outside Options.Dir whatever its configuration says
// (its device-plugin socket under /var/lib/kubelet, its log links in
// /var/log/containers, util-linux's /run/mount) where the run made them.
// Everything else the components write is under Options.Dir.
package cluster
