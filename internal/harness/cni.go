package harness

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// cniBinDir holds Debian's containernetworking-plugins.
const cniBinDir = "/usr/lib/cni"

// CNIBinDir is where the CNI plugins the harness names are found.
const CNIBinDir = cniBinDir

// ipForwardPath is the sysctl the bridge plugin turns on for a gateway.
const ipForwardPath = "/proc/sys/net/ipv4/ip_forward"

// cniHostDirs are created outside any Dir by libcni (its result cache) and
// by containerd (pod network namespaces); Bridge.Close removes them, when
// empty, if they were not there before.
var cniHostDirs = []string{"/var/lib/cni/results", "/var/lib/cni", "/run/netns"}

// Bridge is a CNI network for pods that are not on the host network, local
// to this machine: a Linux bridge of its own with a /24 of its own, pod
// addresses from host-local IPAM under Dir, and port mappings (portmap).
// iptables rules drop whatever would be forwarded between the bridge and any
// other interface, so no pod traffic leaves the machine; the host reaches
// pods directly and through mapped ports on 127.0.0.1.
//
// Close deletes the bridge, the rules, the iptables chains the plugins added
// and the host directories they created, and restores net.ipv4.ip_forward.
type Bridge struct {
	Name   string // e.g. "nstbr3f2a1c"
	Subnet string // e.g. "10.254.77.0/24"
	Dir    string // IPAM state

	rules      [][]string      // filter rules added, as given to -I
	chains     map[string]bool // "table/chain" that existed before
	ipForward  []byte          // the sysctl before
	hadHostDir map[string]bool
}

// StartBridge picks an unused bridge name and subnet and installs the
// forwarding guard; the bridge itself appears with the first pod.
func StartBridge(dir string) (*Bridge, error) {
	for _, tool := range []string{"iptables", "ip", filepath.Join(cniBinDir, "bridge"), filepath.Join(cniBinDir, "portmap"), filepath.Join(cniBinDir, "host-local")} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("CNI bridge needs %s (Debian: iptables, iproute2, containernetworking-plugins): %w", tool, err)
		}
	}
	suffix := make([]byte, 3)
	_, _ = rand.Read(suffix)
	b := &Bridge{Name: "nstbr" + hex.EncodeToString(suffix), Dir: dir, chains: map[string]bool{}, hadHostDir: map[string]bool{}}
	routes, err := exec.Command("ip", "-4", "route", "show", "table", "all").Output()
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	for i := 0; b.Subnet == "" && i < 64; i++ {
		third := 16 + int(suffix[i%3]+byte(i*37))%224
		if prefix := fmt.Sprintf("10.254.%d.", third); !bytes.Contains(routes, []byte(prefix)) {
			b.Subnet = prefix + "0/24"
		}
	}
	if b.Subnet == "" {
		return nil, errors.New("no free 10.254.X.0/24 for the CNI bridge")
	}
	for _, d := range cniHostDirs {
		_, err := os.Stat(d)
		b.hadHostDir[d] = err == nil
	}
	if b.ipForward, err = os.ReadFile(ipForwardPath); err != nil {
		return nil, fmt.Errorf("read ip_forward: %w", err)
	}
	if b.chains, err = iptablesChains(); err != nil {
		return nil, err
	}
	guard := []string{"-m", "comment", "--comment", "cri-nstarget harness: pod traffic stays on this machine", "-j", "DROP"}
	for _, r := range [][]string{
		append([]string{"FORWARD", "-i", b.Name, "!", "-o", b.Name}, guard...),
		append([]string{"FORWARD", "!", "-i", b.Name, "-o", b.Name}, guard...),
	} {
		if err := iptables(append([]string{"-t", "filter", "-I"}, r...)...); err != nil {
			return nil, errors.Join(err, b.Close())
		}
		b.rules = append(b.rules, r)
	}
	return b, nil
}

// ConfList is the CNI network configuration (a .conflist) for containerd.
func (b *Bridge) ConfList() string {
	conf := map[string]any{
		"cniVersion": "1.0.0",
		"name":       "nstarget-" + b.Name,
		"plugins": []any{
			map[string]any{
				"type": "bridge", "bridge": b.Name, "isGateway": true, "ipMasq": false, "hairpinMode": true,
				"ipam": map[string]any{
					"type":    "host-local",
					"ranges":  [][]map[string]string{{{"subnet": b.Subnet}}},
					"dataDir": filepath.Join(b.Dir, "ipam"),
				},
			},
			map[string]any{"type": "portmap", "capabilities": map[string]bool{"portMappings": true}},
		},
	}
	out, _ := json.MarshalIndent(conf, "", "  ")
	return string(out)
}

// Close removes what StartBridge and the plugins added. Call it after
// containerd stopped (its pods are gone).
func (b *Bridge) Close() error {
	var errs []error
	for _, r := range b.rules {
		if err := iptables(append([]string{"-t", "filter", "-D"}, r...)...); err != nil {
			errs = append(errs, err)
		}
	}
	b.rules = nil
	errs = append(errs, b.removeNewChains())
	if _, err := os.Stat("/sys/class/net/" + b.Name); err == nil {
		if out, err := exec.Command("ip", "link", "del", b.Name).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip link del %s: %w: %s", b.Name, err, out))
		}
	}
	if now, err := os.ReadFile(ipForwardPath); err == nil && b.ipForward != nil && !bytes.Equal(now, b.ipForward) {
		if err := os.WriteFile(ipForwardPath, b.ipForward, 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore ip_forward: %w", err))
		}
	}
	for _, d := range cniHostDirs {
		if !b.hadHostDir[d] {
			if err := unix.Rmdir(d); err != nil && !errors.Is(err, unix.ENOENT) && !errors.Is(err, unix.ENOTEMPTY) && !errors.Is(err, unix.EBUSY) {
				errs = append(errs, fmt.Errorf("remove %s: %w", d, err))
			}
		}
	}
	if err := os.RemoveAll(filepath.Join(b.Dir, "ipam")); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// removeNewChains deletes the CNI-* chains that appeared since StartBridge
// (portmap's CNI-HOSTPORT-* and any per-container chain left behind), and
// the rules of older chains that jump to them.
func (b *Bridge) removeNewChains() error {
	now, err := iptablesChains()
	if err != nil {
		return err
	}
	var fresh []string // "table/chain"
	for tc := range now {
		if !b.chains[tc] && strings.Contains(tc, "/CNI-") {
			fresh = append(fresh, tc)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	// Our pods are gone, so their port mappings are: a CNI-HOSTPORT-DNAT
	// that still has rules serves someone else's pods; leave the chains.
	if out, err := exec.Command("iptables", "-w", "-t", "nat", "-S", "CNI-HOSTPORT-DNAT").Output(); err == nil &&
		bytes.Contains(out, []byte("-A CNI-HOSTPORT-DNAT")) {
		return nil
	}
	var errs []error
	for _, tc := range fresh {
		table, chain, _ := strings.Cut(tc, "/")
		errs = append(errs, iptables("-t", table, "-F", chain))
	}
	for _, table := range []string{"filter", "nat"} {
		out, err := exec.Command("iptables", "-w", "-t", table, "-S").Output()
		if err != nil {
			errs = append(errs, fmt.Errorf("iptables -t %s -S: %w", table, err))
			continue
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line)
			if len(f) < 2 || f[0] != "-A" {
				continue
			}
			for _, tc := range fresh {
				if t, c, _ := strings.Cut(tc, "/"); t == table && strings.Contains(line, " -j "+c) {
					errs = append(errs, iptables(append([]string{"-t", table, "-D"}, unquoteFields(f[1:])...)...))
					break
				}
			}
		}
	}
	for _, tc := range fresh {
		table, chain, _ := strings.Cut(tc, "/")
		errs = append(errs, iptables("-t", table, "-X", chain))
	}
	return errors.Join(errs...)
}

// unquoteFields drops the quotes iptables -S puts around comments; the
// fields of a quoted comment are joined back into one argument.
func unquoteFields(f []string) []string {
	var out []string
	for i := 0; i < len(f); i++ {
		if strings.HasPrefix(f[i], `"`) {
			j := i
			for j < len(f)-1 && !strings.HasSuffix(f[j], `"`) {
				j++
			}
			out = append(out, strings.Trim(strings.Join(f[i:j+1], " "), `"`))
			i = j
			continue
		}
		out = append(out, f[i])
	}
	return out
}

// iptablesChains lists "table/chain" for the filter and nat tables.
func iptablesChains() (map[string]bool, error) {
	chains := map[string]bool{}
	for _, table := range []string{"filter", "nat"} {
		out, err := exec.Command("iptables", "-w", "-t", table, "-S").Output()
		if err != nil {
			return nil, fmt.Errorf("iptables -t %s -S: %w", table, err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && (f[0] == "-N" || f[0] == "-P") {
				chains[table+"/"+f[1]] = true
			}
		}
	}
	return chains, nil
}

func iptables(args ...string) error {
	out, err := exec.Command("iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return nil
}
