// Command ipcprobe makes, and looks for, the three kinds of IPC object that
// containers sharing "IPC" share: a SysV shared memory segment, a POSIX
// message queue and a POSIX shared memory file in /dev/shm. It is a fixture
// of the integration tests, which put it into their busybox image as
// /bin/ipcprobe (busybox has no tool that makes the first two).
//
//	ipcprobe make NAME   create all three, named after NAME
//	ipcprobe see NAME    print "sysv=yes|no mqueue=yes|no mqueuefs=yes|no shm=yes|no"
//
// mqueue is the queue as the kernel finds it by name in the caller's IPC
// namespace; mqueuefs is the same queue as a file under /dev/mqueue, which
// shows that mount belongs to that namespace.
package main

import (
	"fmt"
	"hash/fnv"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

func main() {
	if len(os.Args) != 3 || (os.Args[1] != "make" && os.Args[1] != "see") {
		fmt.Fprintln(os.Stderr, "usage: ipcprobe make|see NAME")
		os.Exit(2)
	}
	name := os.Args[2]
	if os.Args[1] == "make" {
		if err := create(name); err != nil {
			fmt.Fprintln(os.Stderr, "ipcprobe:", err)
			os.Exit(1)
		}
		return
	}
	yes := func(ok bool) string {
		if ok {
			return "yes"
		}
		return "no"
	}
	_, sysvErr := unix.SysvShmGet(key(name), 0, 0)
	fd, mqErr := mqOpen(name, unix.O_RDONLY, 0)
	if mqErr == nil {
		unix.Close(fd)
	}
	_, fsErr := os.Stat("/dev/mqueue/" + name)
	_, shmErr := os.Stat("/dev/shm/" + name)
	fmt.Printf("sysv=%s mqueue=%s mqueuefs=%s shm=%s\n", yes(sysvErr == nil), yes(mqErr == nil), yes(fsErr == nil), yes(shmErr == nil))
}

// create makes the shm file last: once it exists, so do the other two.
func create(name string) error {
	if _, err := unix.SysvShmGet(key(name), 4096, unix.IPC_CREAT|0o600); err != nil {
		return fmt.Errorf("shmget: %w", err)
	}
	fd, err := mqOpen(name, unix.O_CREAT|unix.O_RDWR, 0o600)
	if err != nil {
		return fmt.Errorf("mq_open: %w", err)
	}
	unix.Close(fd)
	return os.WriteFile("/dev/shm/"+name, []byte(name), 0o600)
}

func key(name string) int {
	h := fnv.New32a()
	h.Write([]byte(name))
	return int(h.Sum32() & 0x7fffffff)
}

// mqOpen is mq_open(3) without libc: the system call takes the name without
// its leading slash.
func mqOpen(name string, flags int, mode uint32) (int, error) {
	p, err := unix.BytePtrFromString(name)
	if err != nil {
		return -1, err
	}
	fd, _, errno := unix.Syscall6(unix.SYS_MQ_OPEN, uintptr(unsafe.Pointer(p)), uintptr(flags), uintptr(mode), 0, 0, 0)
	if errno != 0 {
		return -1, errno
	}
	return int(fd), nil
}
