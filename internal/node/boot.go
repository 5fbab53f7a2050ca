package node

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The guest's side of the conventions hack/node/image.sh bakes into the image.
const (
	shareTag  = "nst"                 // 9p mount tag, mounted at /mnt/nst
	portName  = "nst.agent"           // virtio-serial port the agent serves
	agentName = "nstarget-node-agent" // the agent's file name in the share
	// cmdline is the kernel's command line: the root filesystem on the
	// virtio disk, the console on the serial port (qemu writes it to a file).
	cmdline = "root=/dev/vda rw console=ttyS0 quiet"
)

// Options say what to boot and how.
type Options struct {
	// Image is the directory hack/node/image.sh prints: disk.img, vmlinuz
	// and initrd.img.
	Image string
	// Agent is the agent binary (internal/nodeagent, built static), copied
	// into the share.
	Agent string
	// Console is the file the guest's serial console goes to; empty: one in
	// the run directory, removed by Stop.
	Console string
	// CPUs and MemoryMiB: 1 and 2048 when zero.
	CPUs      int
	MemoryMiB int
	// Accel is "tcg" (the default) or "kvm", only where /dev/kvm works for
	// real (a nested PVM's /dev/kvm runs a stock kernel only through its
	// instruction emulator, and stops on lock cmpxchg16b).
	Accel string
	// QEMU is the binary; empty: qemu-system-x86_64 from PATH.
	QEMU string
}

// VM is a booted guest.
type VM struct {
	// Share is the host directory the guest sees at /mnt/nst (9p); it holds
	// the agent, and tests may put files there.
	Share string

	dir     string // run directory: the share, the agent's socket, qemu's log; removed by Stop
	console string // the serial console's file
	qemu    *exec.Cmd
	exited  chan struct{} // closed once qemu has exited

	// mu serializes requests: one in flight on the port; it guards port
	// (closed by Stop), rd and lastID.
	mu     sync.Mutex
	port   net.Conn
	rd     *bufio.Reader
	lastID uint64
}

func (o Options) withDefaults() Options {
	if o.CPUs == 0 {
		o.CPUs = 1
	}
	if o.MemoryMiB == 0 {
		o.MemoryMiB = 2048
	}
	if o.Accel == "" {
		o.Accel = "tcg"
	}
	if o.QEMU == "" {
		o.QEMU = "qemu-system-x86_64"
	}
	return o
}

// validate checks what qemu would refuse late or misread.
func (o Options) validate() error {
	if o.Accel != "tcg" && o.Accel != "kvm" {
		return fmt.Errorf("accel %q: want tcg or kvm", o.Accel)
	}
	for _, f := range []string{"disk.img", "vmlinuz", "initrd.img"} {
		if _, err := os.Stat(filepath.Join(o.Image, f)); err != nil {
			return fmt.Errorf("image %q (hack/node/image.sh prints one): %w", o.Image, err)
		}
	}
	for _, p := range []string{o.Image, o.Console} {
		if strings.Contains(p, ",") {
			return fmt.Errorf("path %q: qemu's options take no ','", p)
		}
	}
	return nil
}

// qemuArgs is qemu's command line: direct kernel boot of the image, its disk
// a snapshot, user networking, the share and the agent's port; the serial
// console to a file, nothing on a display.
func qemuArgs(o Options, share, socket, console string) []string {
	cpu := "max"
	if o.Accel == "kvm" {
		cpu = "host"
	}
	return []string{
		"-name", "nstarget-node",
		"-machine", "pc,accel=" + o.Accel, "-cpu", cpu,
		"-smp", strconv.Itoa(o.CPUs), "-m", strconv.Itoa(o.MemoryMiB),
		"-nodefaults", "-no-user-config", "-display", "none",
		"-kernel", filepath.Join(o.Image, "vmlinuz"),
		"-initrd", filepath.Join(o.Image, "initrd.img"),
		"-append", cmdline,
		"-drive", "file=" + filepath.Join(o.Image, "disk.img") + ",format=raw,if=virtio,snapshot=on",
		"-netdev", "user,id=net0", "-device", "virtio-net-pci,netdev=net0",
		"-virtfs", "local,path=" + share + ",mount_tag=" + shareTag + ",security_model=none,id=" + shareTag,
		"-device", "virtio-serial-pci",
		"-chardev", "socket,id=agent,path=" + socket + ",server=on,wait=off",
		"-device", "virtserialport,chardev=agent,name=" + portName,
		"-device", "virtio-rng-pci",
		"-serial", "file:" + console,
	}
}

// Boot starts qemu and returns once the guest's agent answers, or fails
// when ctx ends first (the console's last lines in the error).
func Boot(ctx context.Context, opts Options) (_ *VM, retErr error) {
	opts = opts.withDefaults()
	if err := opts.validate(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "nst-node-")
	if err != nil {
		return nil, fmt.Errorf("make run directory: %w", err)
	}
	defer func() {
		if retErr != nil {
			os.RemoveAll(dir)
		}
	}()
	share := filepath.Join(dir, "share")
	if err := os.Mkdir(share, 0o755); err != nil {
		return nil, fmt.Errorf("make share: %w", err)
	}
	if err := copyFile(opts.Agent, filepath.Join(share, agentName), 0o755); err != nil {
		return nil, fmt.Errorf("copy agent: %w", err)
	}
	console := opts.Console
	if console == "" {
		console = filepath.Join(dir, "console.log")
	}
	socket := filepath.Join(dir, "agent.sock")
	qlog, err := os.Create(filepath.Join(dir, "qemu.log"))
	if err != nil {
		return nil, fmt.Errorf("make qemu log: %w", err)
	}
	defer qlog.Close() // qemu has its own descriptor

	cmd := exec.Command(opts.QEMU, qemuArgs(opts, share, socket, console)...)
	cmd.Stdout, cmd.Stderr = qlog, qlog
	// qemu goes with the process that started it, even one killed before Stop.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start qemu: %w", err)
	}
	vm := &VM{Share: share, dir: dir, console: console, qemu: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(vm.exited)
	}()
	defer func() {
		if retErr != nil {
			vm.kill()
		}
	}()

	if vm.port, err = vm.dial(ctx, socket); err != nil {
		return nil, fmt.Errorf("connect to the agent's port: %w%s", err, vm.logs())
	}
	vm.rd = bufio.NewReader(vm.port)
	defer func() {
		if retErr != nil {
			vm.port.Close()
		}
	}()
	if _, err := vm.Run(ctx, "true"); err != nil {
		return nil, fmt.Errorf("wait for the agent: %w%s", err, vm.logs())
	}
	return vm, nil
}

// dial connects to qemu's end of the agent's port once qemu has made it.
func (v *VM) dial(ctx context.Context, socket string) (net.Conn, error) {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		c, err := net.Dial("unix", socket)
		if err == nil {
			return c, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w (last: %v)", ctx.Err(), err)
		case <-v.exited:
			return nil, errors.New("qemu exited")
		case <-tick.C:
		}
	}
}

// kill ends qemu by its PID and waits for it.
func (v *VM) kill() {
	_ = v.qemu.Process.Kill()
	<-v.exited
}

// logs is the end of qemu's log and of the console, for an error message.
func (v *VM) logs() string {
	var b strings.Builder
	for _, f := range []struct{ name, path string }{
		{"qemu", filepath.Join(v.dir, "qemu.log")},
		{"console", v.console},
	} {
		if t := tail(f.path, 20); t != "" {
			fmt.Fprintf(&b, "\n--- %s (last lines) ---\n%s", f.name, t)
		}
	}
	return b.String()
}

// tail is the last n lines of a file, or "" if it cannot be read.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func copyFile(from, to string, mode os.FileMode) error {
	src, err := os.Open(from)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}
