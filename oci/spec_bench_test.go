package oci

import (
	"encoding/json"
	"fmt"
	"testing"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// benchSpec is about the size and shape of the spec containerd's CRI plugin
// stores for a busybox container (3.6 KB).
func benchSpec() []byte {
	s := specs.Spec{Version: "1.1.0", Hostname: "pod", Root: &specs.Root{Path: "rootfs"},
		Process: &specs.Process{Args: []string{"sleep", "3600"}, Cwd: "/", Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "HOSTNAME=pod"},
			Capabilities: &specs.LinuxCapabilities{Bounding: []string{"CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW", "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE", "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE"}},
			OOMScoreAdj:  new(int)},
		Annotations: map[string]string{"io.kubernetes.cri.container-type": "container", "io.kubernetes.cri.sandbox-id": "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"},
		Linux: &specs.Linux{CgroupsPath: "/kubepods/besteffort/pod/ctr", MaskedPaths: []string{"/proc/acpi", "/proc/kcore", "/proc/keys", "/proc/latency_stats", "/proc/timer_list", "/proc/timer_stats", "/proc/sched_debug", "/proc/scsi", "/sys/firmware"},
			ReadonlyPaths: []string{"/proc/asound", "/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger"},
			Namespaces:    []specs.LinuxNamespace{{Type: "pid"}, {Type: "ipc", Path: "/proc/42/ns/ipc"}, {Type: "uts", Path: "/proc/42/ns/uts"}, {Type: "mount"}, {Type: "network", Path: "/var/run/netns/cni-1"}}},
	}
	for i := 0; i < 12; i++ {
		s.Mounts = append(s.Mounts, specs.Mount{Destination: fmt.Sprintf("/mnt/%d", i), Type: "bind", Source: fmt.Sprintf("/var/lib/kubelet/pods/x/volumes/%d", i), Options: []string{"rbind", "rprivate", "rw"}})
	}
	b, _ := json.Marshal(s)
	return b
}

// BenchmarkPatch is one targeted create's spec edit (without containerd).
func BenchmarkPatch(b *testing.B) {
	raw := benchSpec()
	b.SetBytes(int64(len(raw)))
	rec := Record{Target: "t", Namespaces: map[string]NamespaceRecord{"pid": {Result: Targeted, Path: "/run/cri-nstarget/pins/x/pid"}}}
	for i := 0; i < b.N; i++ {
		if _, err := Patch(raw, func(s *specs.Spec) ([]Opt, error) {
			NamespacePath(s, specs.PIDNamespace)
			return []Opt{WithNamespacePath(specs.PIDNamespace, "/run/cri-nstarget/pins/x/pid"), WithRecord(rec)}, nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}
