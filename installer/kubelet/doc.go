// Package kubelet finds where a node's kubelet takes its container runtime
// endpoint from, and writes the one change that points it at another
// socket. It reads nothing itself: the installer hands it the kubelet's
// command line (/proc/PID/cmdline) and the files that can have made it (Node),
// so every layout is a fixture in the tests.
//
// The endpoint is the kubelet's last --container-runtime-endpoint on its
// command line, or, without the flag, containerRuntimeEndpoint of its
// KubeletConfiguration (--config, overridden by the files of --config-dir).
// A flag on the command line came from one of the files its systemd unit
// reads: kubeadm's /var/lib/kubelet/kubeadm-flags.env (KUBELET_KUBEADM_ARGS),
// another EnvironmentFile (/etc/default/kubelet: KUBELET_EXTRA_ARGS), or an
// Environment= or ExecStart= line of the unit or a drop-in. Find names that
// one place; a layout it cannot pin to one place it may change (the flag in
// two files, in a vendor's unit file under /usr, nowhere it can see, a
// kubelet with neither the flag nor --config) is an error saying so, and
// the installer then changes nothing.
//
// Point renders the change as an Edit (the file's bytes before and after),
// and checks that the file as changed gives the new endpoint. Revert is the
// way back: the bytes as they were when the file is still as the Edit left
// it, else the endpoint pointed back in the same place.
package kubelet
