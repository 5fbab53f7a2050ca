package conformance

import (
	"fmt"
	"os"
	"strconv"
	"strings"

	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
)

// podUserns is what kubelet sends for a pod with hostUsers: false: a user
// namespace of the pod's (mode POD) with maps for uids and gids, on the pod
// and, the same, on every container of the pod (newPod and create do that).
var podUserns = &runtimeapi.UserNamespace{
	Mode: runtimeapi.NamespaceMode_POD,
	Uids: []*runtimeapi.IDMapping{{ContainerId: 0, HostId: 1000, Length: 100000}},
	Gids: []*runtimeapi.IDMapping{{ContainerId: 0, HostId: 1000, Length: 100000}},
}

// hostIdentityMap is /proc/self/uid_map in the host's user namespace.
const hostIdentityMap = "0 0 4294967295"

func withUserns(cfg *runtimeapi.PodSandboxConfig) {
	cfg.Linux.SecurityContext.NamespaceOptions.UsernsOptions = podUserns
}

// needUserns skips the case, with the reason, when the runtime's default
// handler does not report user-namespace support (CRI Status, verbose);
// with --require-userns it fails the case instead.
func needUserns(c *tc) {
	c.Helper()
	resp, err := suite.rt.Status(c.ctx, &runtimeapi.StatusRequest{Verbose: true})
	if err != nil {
		c.fatalf("CRI Status: %s", short(err))
	}
	for _, h := range resp.GetRuntimeHandlers() {
		if h.GetName() == "" && h.GetFeatures().GetUserNamespaces() {
			return
		}
	}
	why := fmt.Sprintf("%s %s does not report user-namespace support (CRI Status lists no default runtime handler with the user_namespaces feature), so it cannot run a pod with hostUsers: false",
		suite.version.GetRuntimeName(), suite.version.GetRuntimeVersion())
	if *requireUserns {
		c.fatalf("%s; --require-userns", why)
	}
	c.skipf("%s", why)
}

// idMapText is mappings as /proc/PID/uid_map lists them, normalised: one
// "inside outside length" per line, lines joined with "; ".
func idMapText(m []*runtimeapi.IDMapping) string {
	var lines []string
	for _, e := range m {
		lines = append(lines, strconv.FormatUint(uint64(e.GetContainerId()), 10)+" "+strconv.FormatUint(uint64(e.GetHostId()), 10)+" "+strconv.FormatUint(uint64(e.GetLength()), 10))
	}
	return strings.Join(lines, "; ")
}

func normaliseMap(s string) string {
	var lines []string
	for _, l := range strings.Split(s, "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			lines = append(lines, strings.Join(f, " "))
		}
	}
	return strings.Join(lines, "; ")
}

// userView is the user namespace of a new process in a container and its
// uid and gid maps (normalised).
type userView struct{ ns, uids, gids string }

func (u userView) String() string {
	return fmt.Sprintf("%s (uid_map %s, gid_map %s)", u.ns, u.uids, u.gids)
}

func (c *tc) user(name, id string) userView {
	c.Helper()
	return userView{
		ns:   c.ns(name, id, "user"),
		uids: normaliseMap(c.mustExec("read "+name+"'s uid_map", id, "cat", "/proc/self/uid_map")),
		gids: normaliseMap(c.mustExec("read "+name+"'s gid_map", id, "cat", "/proc/self/gid_map")),
	}
}

// podUser is the pod's user namespace, read from its reference container
// (pns.ref). The pod must not be in the host's user namespace, and its maps
// must be the ones userns_options asked for; else the case cannot tell
// anything and fails.
func (c *tc) podUser(pns podNS) userView {
	c.Helper()
	u := c.user("ref", pns.ref)
	host, _ := os.Readlink("/proc/self/ns/user") // the suite's own: the host's, unless the suite runs in a container
	if u.uids == hostIdentityMap || u.ns == host {
		c.fatalf("setup: the pod runs in the host's user namespace %s although the runtime reports user-namespace support: userns_options ignored", u)
	}
	if want := idMapText(podUserns.Uids); u.uids != want || u.gids != idMapText(podUserns.Gids) {
		c.fatalf("setup: the pod's user namespace %s, want uid_map and gid_map %s as userns_options asked", u, want)
	}
	return u
}

// inPodUser checks that container id is in the pod's user namespace pu, with
// its maps, not the host's; it returns what it saw.
func (c *tc) inPodUser(name, id string, pu userView) userView {
	c.Helper()
	u := c.user(name, id)
	switch {
	case u.uids == hostIdentityMap:
		c.errorf("%s runs in the host's user namespace %s, not the pod's %s", name, u, pu)
	case u != pu:
		c.errorf("%s runs in user namespace %s, not the pod's %s", name, u, pu)
	}
	return u
}

// A pod with hostUsers: false: the app has its own PID namespace, which
// the pod's user namespace owns; a debug container with pid TARGET (and the
// pod's userns_options, as kubelet sends) must join the app's PID namespace
// and stay in the pod's user namespace.
func caseUsernsPIDTarget(c *tc) {
	needUserns(c)
	p, pns, app, appCmd := targetPod(c, withUserns)
	pu := c.podUser(pns)
	if u := c.user("app", app); u != pu {
		c.fatalf("setup: the app runs in user namespace %s, not the pod's %s: the runtime does not give a pod's containers the pod's user namespace", u, pu)
	}
	dbg := checkPIDTarget(c, p, pns, app, appCmd)
	u := c.inPodUser("debug", dbg, pu)
	c.saw("user namespace: debug %s, target and pod %s", u, pu)
}

// The same pod; the app enters an IPC namespace of its own (unshare -i,
// CAP_SYS_ADMIN in the pod's user namespace, which then owns the new IPC
// namespace); a debug container with ipc (and pid) TARGET must join it and
// stay in the pod's user namespace.
func caseUsernsIPCTarget(c *tc) {
	needUserns(c)
	p := c.newPod("ipc", withUserns)
	pns := c.podNamespaces(p)
	pu := c.podUser(pns)
	app, dbg := checkIPCTarget(c, p, pns)
	if u := c.user("app", app); u != pu {
		c.fatalf("setup: the app runs in user namespace %s, not the pod's %s: the runtime does not give a pod's containers the pod's user namespace", u, pu)
	}
	u := c.inPodUser("debug", dbg, pu)
	c.saw("user namespace: debug %s, target and pod %s", u, pu)
}
