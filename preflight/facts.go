package preflight

import "io/fs"

// Facts is what Gather read of the node; each field holds its error when
// it could not be read.
type Facts struct {
	Kernel    string // uname -r
	KernelErr error
	Pidfd     error // pidfd_open(2) of the checking process itself
	Cgroup2   bool  // /sys/fs/cgroup is cgroup2fs
	CgroupErr error

	CRI Answer // the backend's CRI Version, on runtime_endpoint
	API Answer // containerd's version service, on containerd_address

	NRI error // a connection to nri_socket: nil when it accepted one

	// SocketDirs are listen's directory and its parents, from / down.
	SocketDirs []Dir
	Group      Group // socket_group resolved (GID -1: none set)

	Kubelets []KubeletProc // every kubelet process
	// KubeletBinaries answered --version: each running kubelet's binary
	// (/proc/PID/exe), or with none running the kubelet on PATH; none
	// when there is neither.
	KubeletBinaries []KubeletBinary
}

// Answer is what a containerd socket answered to a version question.
type Answer struct {
	Name    string // the CRI's RuntimeName ("containerd"); empty from the API
	Version string // "v2.4.2"
	Err     error
}

// Dir is one directory on the listen socket's path.
type Dir struct {
	Path     string
	Missing  bool // not there: the shim makes it
	Mode     fs.FileMode
	UID, GID int
	Err      error // other than missing
}

// Group is socket_group, resolved.
type Group struct {
	Name string // as configured
	GID  int    // -1: none configured
	Err  error
}

// KubeletProc is one kubelet process and the endpoint it runs with.
type KubeletProc struct {
	PID      int
	Endpoint string
	From     string // what sets it
	Err      error
}

// KubeletBinary is what a kubelet's binary said to --version.
type KubeletBinary struct {
	PID     int    // the running kubelet's; 0: not running, found on PATH
	Path    string // what was run: /proc/PID/exe, or the file on PATH
	Version string // "v1.37.0"
	Err     error
}
