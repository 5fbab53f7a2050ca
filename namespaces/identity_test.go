package namespaces

import (
	"slices"
	"testing"
)

// /proc/<pid>/cgroup's paths, cgroup v1 and v2, in a cgroup namespace or
// not; a line that is none is an error.
func TestParseCgroupPaths(t *testing.T) {
	for _, tc := range []struct {
		desc, data string
		want       []string
		bad        bool
	}{
		{desc: "cgroup v2", data: "0::/kubepods.slice/kubepods-besteffort.slice/cri-containerd-ab12.scope\n",
			want: []string{"/kubepods.slice/kubepods-besteffort.slice/cri-containerd-ab12.scope"}},
		{desc: "cgroup v1, cgroupfs", data: "12:pids:/kubepods/besteffort/pod1/ab12\n11:cpu,cpuacct:/kubepods/besteffort/pod1/ab12\n1:name=systemd:/kubepods/besteffort/pod1/ab12\n",
			want: []string{"/kubepods/besteffort/pod1/ab12", "/kubepods/besteffort/pod1/ab12", "/kubepods/besteffort/pod1/ab12"}},
		{desc: "hybrid: v2 line at the root", data: "3:memory:/x/ab12\n0::/\n", want: []string{"/x/ab12", "/"}},
		{desc: "in a cgroup namespace: above its root", data: "0::/../../pod1/ab12\n", want: []string{"/../../pod1/ab12"}},
		{desc: "a colon in the path", data: "0::/a:b/ab12\n", want: []string{"/a:b/ab12"}},
		{desc: "empty", data: "", want: nil},
		{desc: "no path", data: "0:pids\n", bad: true},
		{desc: "relative path", data: "0::ab12\n", bad: true},
	} {
		got, err := parseCgroupPaths(tc.data)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q, %v; want %q (error: %v)", tc.desc, got, err, tc.want, tc.bad)
		}
	}
}

// /proc/<pid>/status's NSpid: the pids outermost first; Init is the
// innermost's being 1.
func TestParseNSpid(t *testing.T) {
	for _, tc := range []struct {
		desc, data string
		want       []int
		init, know bool
		bad        bool
	}{
		{desc: "a container's init", data: "Name:\tsleep\nPid:\t4242\nNSpid:\t4242\t1\nNSpgid:\t4242\t1\n", want: []int{4242, 1}, init: true, know: true},
		{desc: "nested twice", data: "NSpid:\t4242\t7\t1\n", want: []int{4242, 7, 1}, init: true, know: true},
		{desc: "another process of the container", data: "NSpid:\t4243\t12\n", want: []int{4243, 12}, know: true},
		{desc: "a host process", data: "Pid:\t4242\nNSpid:\t4242\n", want: []int{4242}, know: true},
		{desc: "the host's init", data: "NSpid:\t1\n", want: []int{1}, init: true, know: true},
		{desc: "a kernel without NSpid", data: "Name:\tsleep\nPid:\t4242\n"},
		{desc: "NSpid with no pid", data: "NSpid:\t\n", bad: true},
		{desc: "NSpid not a number", data: "NSpid:\t42x\t1\n", bad: true},
		{desc: "NSpid zero", data: "NSpid:\t42\t0\n", bad: true},
	} {
		got, err := parseNSpid(tc.data)
		if (err != nil) != tc.bad || !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, %v; want %v (error: %v)", tc.desc, got, err, tc.want, tc.bad)
			continue
		}
		if init, known := (Identity{NSpid: got}).Init(); init != tc.init || known != tc.know {
			t.Errorf("%s: Init %v, known %v; want %v, %v", tc.desc, init, known, tc.init, tc.know)
		}
	}
}
