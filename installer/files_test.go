package installer

import "testing"

// The shim's Events go out under the kubelet's own kubeconfig, as its
// command line names it; a kubelet without one (standalone), or with a
// relative one, gets none: Events off.
func TestEventsKubeconfig(t *testing.T) {
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"/usr/bin/kubelet", "--kubeconfig=/etc/kubernetes/kubelet.conf", "--config=/var/lib/kubelet/config.yaml"}, "/etc/kubernetes/kubelet.conf"},
		{[]string{"/usr/bin/kubelet", "--kubeconfig", "/var/lib/kubelet/kubeconfig", "--kubeconfig=/srv/k/../kubelet.kubeconfig"}, "/srv/kubelet.kubeconfig"},
		{[]string{"/usr/bin/kubelet", "--config=/var/lib/kubelet/config.yaml"}, ""},
		{[]string{"/usr/bin/kubelet", "--kubeconfig=kubelet.conf"}, ""},
		{[]string{"/usr/bin/kubelet", "--", "--kubeconfig=/etc/kubernetes/kubelet.conf"}, ""},
	} {
		if got := eventsKubeconfig(c.argv); got != c.want {
			t.Errorf("eventsKubeconfig(%q) = %q, want %q", c.argv, got, c.want)
		}
	}
}
