package node

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// diagnose is what the agent can still tell, without running anything,
// when /bin/sh could not be started at all: how the paths an exec of it
// needs resolve in the agent's own view of the filesystem (its root, its
// mount namespace beside PID 1's, what is mounted at /, /usr and /bin) and
// the kernel's last messages. A run that fails so leaves no shell to ask.
func diagnose() string {
	var b strings.Builder
	for _, p := range []string{"/proc/self/root", "/proc/self/ns/mnt", "/proc/1/ns/mnt", "/bin", "/lib64"} {
		to, err := os.Readlink(p)
		fmt.Fprintf(&b, "readlink %s: %q %v\n", p, to, err)
	}
	for _, p := range []string{"/bin/sh", "/usr/bin/dash", "/lib64/ld-linux-x86-64.so.2", "/usr/bin/journalctl",
		"/usr", "/usr/bin", "/usr/lib", "/usr/lib64", "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2", "/etc", "/etc/ld.so.cache"} {
		fi, err := os.Stat(p)
		if err != nil {
			fmt.Fprintf(&b, "stat %s: %v\n", p, err)
			continue
		}
		fmt.Fprintf(&b, "stat %s: %v %d bytes\n", p, fi.Mode(), fi.Size())
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err != nil {
		fmt.Fprintf(&b, "mountinfo: %v\n", err)
	} else {
		for _, l := range strings.Split(string(mi), "\n") {
			if f := strings.Fields(l); len(f) > 4 && (f[4] == "/" || strings.HasPrefix(f[4], "/usr") || strings.HasPrefix(f[4], "/bin")) {
				fmt.Fprintf(&b, "mountinfo: %s\n", l)
			}
		}
	}
	b.WriteString(kernelTail(40))
	return b.String()
}

// kernelTail is the kernel's last n messages (/dev/kmsg, read without
// waiting for more).
func kernelTail(n int) string {
	fd, err := syscall.Open("/dev/kmsg", syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Sprintf("kmsg: %v\n", err)
	}
	defer syscall.Close(fd)
	var lines []string
	buf := make([]byte, 8192)
	for {
		k, err := syscall.Read(fd, buf)
		if err == syscall.EPIPE {
			continue // overwritten while read: the next one follows
		}
		if err != nil || k <= 0 {
			break
		}
		msg := string(buf[:k])
		if _, text, ok := strings.Cut(msg, ";"); ok {
			msg = text
		}
		lines = append(lines, strings.TrimRight(msg, "\n"))
		if len(lines) > n {
			lines = lines[1:]
		}
	}
	return "kernel: " + strings.Join(lines, "\nkernel: ") + "\n"
}
