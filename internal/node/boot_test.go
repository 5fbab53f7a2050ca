package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// hasPair reports whether args hold flag followed by value.
func hasPair(args []string, flag, value string) bool {
	for i := 0; i+1 < len(args); i++ {
		if args[i] == flag && args[i+1] == value {
			return true
		}
	}
	return false
}

func TestQEMUArgs(t *testing.T) {
	for _, tc := range []struct {
		desc string
		opts Options
		want [][2]string
	}{
		{desc: "defaults: tcg, one vCPU, a snapshot disk", opts: Options{Image: "/img"}, want: [][2]string{
			{"-machine", "pc,accel=tcg"}, {"-cpu", "max"}, {"-smp", "1"}, {"-m", "2048"},
			{"-drive", "file=/img/disk.img,format=raw,if=virtio,snapshot=on"},
			{"-kernel", "/img/vmlinuz"}, {"-initrd", "/img/initrd.img"}, {"-append", cmdline},
			{"-virtfs", "local,path=/run/share,mount_tag=nst,security_model=none,id=nst"},
			{"-chardev", "socket,id=agent,path=/run/agent.sock,server=on,wait=off"},
			{"-device", "virtserialport,chardev=agent,name=nst.agent"},
			{"-serial", "file:/run/console.log"},
		}},
		{desc: "kvm", opts: Options{Image: "/img", Accel: "kvm", CPUs: 2, MemoryMiB: 4096}, want: [][2]string{
			{"-machine", "pc,accel=kvm"}, {"-cpu", "host"}, {"-smp", "2"}, {"-m", "4096"},
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			args := qemuArgs(tc.opts.withDefaults(), "/run/share", "/run/agent.sock", "/run/console.log")
			for _, w := range tc.want {
				if !hasPair(args, w[0], w[1]) {
					t.Errorf("no %s %s in %q", w[0], w[1], args)
				}
			}
		})
	}
}

func TestValidate(t *testing.T) {
	image := t.TempDir()
	for _, f := range []string{"disk.img", "vmlinuz", "initrd.img"} {
		if err := os.WriteFile(filepath.Join(image, f), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		desc string
		opts Options
		want string // in the error; "" for none
	}{
		{desc: "an image", opts: Options{Image: image}},
		{desc: "unknown accelerator", opts: Options{Image: image, Accel: "hvf"}, want: "want tcg or kvm"},
		{desc: "no image", opts: Options{Image: filepath.Join(image, "none")}, want: "hack/node/image.sh prints one"},
		{desc: "a comma in a path", opts: Options{Image: image, Console: "/tmp/a,b"}, want: "no ','"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			err := tc.opts.withDefaults().validate()
			if (err == nil) != (tc.want == "") || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Errorf("validate: %v, want %q", err, tc.want)
			}
		})
	}
}

// TestBoot boots the node image (make node-boot-check) and checks, from
// inside the guest, what the node tests will rely on: systemd as PID 1 and
// running, cgroup v2 alone, the share, the host's loopback at 10.0.2.2. It
// logs the time of each step.
func TestBoot(t *testing.T) {
	image, agent := os.Getenv("NSTARGET_NODE_IMAGE"), os.Getenv("NSTARGET_NODE_AGENT")
	if image == "" || agent == "" {
		t.Skip("NSTARGET_NODE_IMAGE and NSTARGET_NODE_AGENT unset: make node-boot-check builds both and runs this")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	opts := Options{Image: image, Agent: agent, Accel: os.Getenv("NSTARGET_NODE_ACCEL")}
	if dir := os.Getenv("NSTARGET_NODE_LOGS"); dir != "" {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		opts.Console = filepath.Join(dir, "console.log")
	}

	start := time.Now()
	bootCtx, cancelBoot := context.WithTimeout(ctx, 3*time.Minute)
	defer cancelBoot()
	vm, err := Boot(bootCtx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("boot: the agent answers %.1fs after qemu started", time.Since(start).Seconds())
	t.Cleanup(func() {
		stopCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		begin := time.Now()
		if err := vm.Stop(stopCtx); err != nil {
			t.Errorf("stop: %v", err)
		}
		t.Logf("stop: powered off in %.1fs", time.Since(begin).Seconds())
		if _, err := os.Stat(vm.dir); !os.IsNotExist(err) {
			t.Errorf("run directory %s left behind (%v)", vm.dir, err)
		}
	})
	state, err := vm.WaitRunning(ctx)
	t.Logf("boot: systemd %s %.1fs after qemu started", state, time.Since(start).Seconds())
	if err != nil {
		t.Error(err)
	}
	if out, err := vm.Output(ctx, "systemd-analyze time; systemd-analyze blame | head -n 8"); err == nil {
		t.Logf("guest: %s", out)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		if c, err := ln.Accept(); err == nil {
			fmt.Fprintln(c, "from the host's loopback")
			c.Close()
		}
	}()
	if err := os.WriteFile(filepath.Join(vm.Share, "from-host"), []byte("shared\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ desc, script, want string }{
		{"PID 1", "cat /proc/1/comm", "systemd"},
		{"systemd's version", "systemctl --version | head -n1 | cut -d' ' -f1,2", "systemd 252"},
		{"/sys/fs/cgroup", "stat -fc %T /sys/fs/cgroup", "cgroup2fs"},
		{"no cgroup v1 hierarchy", "grep -c ' cgroup ' /proc/mounts || true", "0"},
		{"controllers", "cat /sys/fs/cgroup/cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma misc"},
		{"root filesystem", "findmnt -no SOURCE,FSTYPE /", "/dev/vda ext4"},
		{"the share", "cat /mnt/nst/from-host", "shared"},
		{"the host's 127.0.0.1 at 10.0.2.2", fmt.Sprintf("bash -c 'exec 3<>/dev/tcp/10.0.2.2/%d && cat <&3'",
			ln.Addr().(*net.TCPAddr).Port), "from the host's loopback"},
	} {
		got, err := vm.Output(ctx, tc.script)
		if err != nil || got != tc.want {
			t.Errorf("%s: %q (%v), want %q", tc.desc, got, err, tc.want)
			continue
		}
		t.Logf("guest: %s: %s", tc.desc, got)
	}

	res, err := vm.Run(ctx, "echo out; echo err >&2; exit 3")
	if err != nil || string(res.Stdout) != "out\n" || string(res.Stderr) != "err\n" || res.Code != 3 {
		t.Errorf("output and status through the port: %+v, %v", res, err)
	}
	var trips []time.Duration
	for range 10 {
		begin := time.Now()
		if _, err := vm.Run(ctx, "true"); err != nil {
			t.Fatal(err)
		}
		trips = append(trips, time.Since(begin))
	}
	slices.Sort(trips)
	t.Logf("round trip of `true` (10): min %v, median %v, max %v", trips[0].Round(time.Millisecond),
		trips[len(trips)/2].Round(time.Millisecond), trips[len(trips)-1].Round(time.Millisecond))
}
