package preflight

import (
	"bytes"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/cri-nstarget/cri-nstarget/installer/kubelet"
)

// kubelets finds the kubelet processes under procRoot (by their comm) and
// reads, under root, the configuration each names, for its endpoint.
func kubelets(procRoot, root string) []KubeletProc {
	entries, err := os.ReadDir(procRoot)
	if err != nil {
		return []KubeletProc{{Err: err}}
	}
	var out []KubeletProc
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join(procRoot, e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "kubelet" {
			continue
		}
		out = append(out, kubeletOf(pid, filepath.Join(procRoot, e.Name()), root))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].PID < out[j].PID })
	return out
}

// kubeletOf reads one kubelet's command line and the files it names.
func kubeletOf(pid int, dir, root string) KubeletProc {
	k := KubeletProc{PID: pid}
	b, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		k.Err = err
		return k
	}
	argv := strings.Split(string(bytes.TrimRight(b, "\x00")), "\x00")
	n, err := kubelet.Read(root, argv, kubelet.Unit{})
	if err != nil {
		k.Err = err
		return k
	}
	k.Endpoint, k.From, k.Err = kubelet.Endpoint(n)
	return k
}
