#!/usr/bin/env bash
# Builds a Debian 12 node disk image from Debian's packages only, caches it,
# and prints the directory holding it (issue 25: a node with systemd as PID 1
# on cgroup v2, booted under qemu by internal/node):
#
#   hack/node/image.sh    # -> /var/cache/cri-nstarget/node-image-<12 hex>
#
#   disk.img      the root filesystem: raw ext4, 3 GiB, sparse; boot it with
#                 snapshot=on and it stays as built
#   vmlinuz       the guest's kernel and initrd, for qemu's direct kernel boot
#   initrd.img    (no boot loader): root=/dev/vda
#   packages.txt  what the guest has installed, name and version
#   debootstrap.log
#
# The directory is named after the sha256 of this script, so a changed script
# builds a new image; when it exists the script only prints it. Each step
# prints its time on stderr. As root; installs what it needs on the host
# (debootstrap, qemu-system-x86) from apt.
#
# The guest: debootstrap's minbase of bookworm from the Debian mirror this
# host's apt uses (read from its sources at run time; NODE_MIRROR overrides,
# and the mirror is written nowhere but into the image), with systemd as
# init, udev, dbus, the kernel (linux-image-amd64), and what a node needs:
# iptables, iproute2, kmod, procps, util-linux, ca-certificates, apparmor
# (its parser and apparmor.service, as on a real Debian or Ubuntu node:
# with them containerd confines each container to cri-containerd.apparmor.d,
# which the plugin mode's DaemonSet must opt out of); and what a
# baker installs from Debian for a container node: containerd (1.6.20, enabled
# by its package with its default config), runc and containernetworking-plugins
# (/usr/lib/cni). The test writes containerd's configuration (the systemd
# cgroup driver) as a baker would; cri-nstarget, kubelet and containerd 2.4
# come from the host through the share, never baked in.
#   - Boot time under TCG: the initrd holds only virtio_pci, virtio_blk and
#     ext4 (MODULES=list, about 4.5 s less), e2scrub_reap is masked (4 to 9 s).
#   - Nothing waits on a console: systemd-firstboot and the apt timers are
#     masked.
#   - Shutdown: DefaultTimeoutStopSec=10s. A container whose PID 1 ignores
#     SIGTERM (sleep does, as a namespace's init) outlives containerd's
#     stop (KillMode=process keeps the shims), and systemd-shutdown's last
#     SIGTERM round would wait the default 90 s for it at every poweroff and
#     reboot.
#   - Network: systemd-networkd takes DHCP on qemu's user network; the
#     nameserver is qemu's (10.0.2.3); the host's 127.0.0.1 is 10.0.2.2.
#   - internal/node's command channel: qemu shares a host directory over 9p
#     with the tag nst, mounted at /mnt/nst, and names a virtio-serial port
#     nst.agent; when that port appears, udev starts nstarget-node-agent.service,
#     which runs /mnt/nst/nstarget-node-agent on it (built on the host from
#     internal/nodeagent, so the image does not change with the agent).
set -euo pipefail
[ "$(id -u)" = 0 ] || { echo "node-image: run as root (debootstrap, chroot, mkfs)" >&2; exit 1; }
suite=bookworm
cache=${NODE_IMAGE_CACHE:-/var/cache/cri-nstarget}
hash=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-12)
out="$cache/node-image-$hash"
built() { [ -s "$out/disk.img" ] && [ -s "$out/vmlinuz" ] && [ -s "$out/initrd.img" ]; }
if built; then
  echo "$out"
  exit 0
fi

exec 3>&1 1>&2 # stdout is for the directory; what the build prints goes to stderr
mkdir -p "$cache"
exec 9>"$cache/node-image.lock"
flock 9 # one build at a time; the one that waited finds the image built
if built; then
  echo "$out" >&3
  exit 0
fi

timed() { # timed WHAT COMMAND...: runs COMMAND, then prints how long it took
  local what=$1 start=$SECONDS
  shift
  "$@"
  printf 'node-image: %-28s %4ds\n' "$what" $((SECONDS - start)) >&2
}

host_packages() {
  local need=()
  command -v debootstrap >/dev/null || need+=(debootstrap)
  command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
  command -v mkfs.ext4 >/dev/null || need+=(e2fsprogs)
  command -v systemctl >/dev/null || need+=(systemd) # systemctl --root: no systemd needs to run
  [ ${#need[@]} -gt 0 ] || return 0
  echo "node-image: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
}

# mirror prints the first URI apt uses for $suite: a deb822 stanza in
# sources.list.d/*.sources whose Suites name it, else a one-line "deb" entry.
mirror() {
  local f uri
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -e "$f" ] || continue
    uri=$(awk -v suite="$suite" 'BEGIN { RS = ""; FS = "\n" }
      { uris = ""; named = 0
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); split($i, u, /[ \t]+/); uris = u[1] }
          if ($i ~ /^Suites:/ && (" " $i " ") ~ ("[ \t]" suite "[ \t]")) named = 1
        }
        if (named && uris != "") { print uris; exit } }' "$f")
    [ -z "$uri" ] || { echo "$uri"; return; }
  done
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
    sed -E 's/\[[^]]*\]//' | awk -v suite="$suite" '$1 == "deb" && $3 == suite { print $2; exit }'
}

# unmount_under unmounts every mount at or below $1, deepest first
# (debootstrap mounts /proc and /sys in the target, and unmounts them itself
# unless it is killed).
unmount_under() {
  local m
  for m in $(awk -v p="$1" '$5 == p || index($5, p "/") == 1 { print $5 }' /proc/self/mountinfo | sort -r); do
    umount "$m" 2>/dev/null || umount -l "$m"
  done
}

tmp="$out.tmp"
root="$tmp/root"
cleanup() {
  unmount_under "$tmp"
  rm -rf --one-file-system "$tmp"
}
trap cleanup EXIT
cleanup

timed "host packages" host_packages
url=${NODE_MIRROR:-$(mirror)}
[ -n "$url" ] || { echo "node-image: no $suite mirror in apt's sources; set NODE_MIRROR" >&2; exit 1; }

# Stage one downloads and unpacks; the initrd's configuration goes in before
# stage two installs the kernel, so its first initrd is already the small one.
include=systemd,systemd-sysv,udev,dbus,linux-image-amd64,initramfs-tools,kmod,iptables,iproute2,procps,util-linux,ca-certificates,apparmor
include+=,containerd,runc,containernetworking-plugins
mkdir -p "$root"
log="$tmp/debootstrap.log"
stage() { "$@" >>"$log" 2>&1 || { tail -n 30 "$log" >&2; echo "node-image: $* failed" >&2; return 1; }; }
timed "debootstrap (download)" stage debootstrap --variant=minbase --foreign --arch=amd64 --include="$include" \
  "$suite" "$root" "$url"
mkdir -p "$root/etc/initramfs-tools/conf.d" "$root/etc/initramfs-tools/hooks"
cat >"$root/etc/initramfs-tools/conf.d/nstarget-node.conf" <<'EOF'
# The node boots under qemu from a virtio disk holding ext4: nothing else.
MODULES=list
COMPRESS=gzip
EOF
cat >"$root/etc/initramfs-tools/hooks/nstarget-node" <<'EOF'
#!/bin/sh
# Loads the modules the root filesystem needs (MODULES=list: these only).
[ "$1" = prereqs ] && exit 0
. /usr/share/initramfs-tools/hook-functions
for m in virtio_pci virtio_blk ext4; do force_load "$m"; done
EOF
chmod 0755 "$root/etc/initramfs-tools/hooks/nstarget-node"
timed "debootstrap (install)" stage chroot "$root" /debootstrap/debootstrap --second-stage
unmount_under "$root"

# The node's configuration.
echo nstarget-node >"$root/etc/hostname"
printf '127.0.0.1\tlocalhost\n127.0.1.1\tnstarget-node\n' >"$root/etc/hosts"
printf '/dev/vda\t/\text4\trw,errors=remount-ro\t0\t0\n' >"$root/etc/fstab"
echo 'nameserver 10.0.2.3' >"$root/etc/resolv.conf"
cat >"$root/etc/systemd/network/50-dhcp.network" <<'EOF'
[Match]
Name=en* eth*

[Network]
DHCP=ipv4
EOF
mkdir -p "$root/mnt/nst"
cat >"$root/etc/systemd/system/mnt-nst.mount" <<'EOF'
[Unit]
Description=The host's share for this node (internal/node)

[Mount]
What=nst
Where=/mnt/nst
Type=9p
Options=trans=virtio,version=9p2000.L,msize=262144
EOF
cat >"$root/etc/systemd/system/nstarget-node-agent.service" <<'EOF'
[Unit]
Description=Command channel to the host (internal/node)
BindsTo=dev-virtio\x2dports-nst.agent.device
After=dev-virtio\x2dports-nst.agent.device
RequiresMountsFor=/mnt/nst

[Service]
Type=simple
ExecStart=/mnt/nst/nstarget-node-agent /dev/virtio-ports/nst.agent
Restart=always
RestartSec=1
EOF
cat >"$root/etc/udev/rules.d/90-nstarget-node-agent.rules" <<'EOF'
SUBSYSTEM=="virtio-ports", ATTR{name}=="nst.agent", TAG+="systemd", ENV{SYSTEMD_WANTS}+="nstarget-node-agent.service"
EOF
mkdir -p "$root/etc/systemd/system.conf.d"
printf '[Manager]\nDefaultTimeoutStopSec=10s\n' >"$root/etc/systemd/system.conf.d/50-nstarget-node.conf"
systemctl --root="$root" enable --quiet systemd-networkd.service
systemctl --root="$root" mask --quiet e2scrub_reap.service systemd-firstboot.service \
  apt-daily.timer apt-daily-upgrade.timer
rm -f "$root"/var/cache/apt/archives/*.deb
chroot "$root" dpkg-query -W -f '${Package} ${Version}\n' >"$tmp/packages.txt"
kernels=("$root"/boot/vmlinuz-*)
[ ${#kernels[@]} = 1 ] && [ -e "${kernels[0]}" ] || { echo "node-image: want one kernel in /boot: ${kernels[*]}" >&2; exit 1; }
cp "${kernels[0]}" "$tmp/vmlinuz"
cp "$root/boot/initrd.img-${kernels[0]#"$root"/boot/vmlinuz-}" "$tmp/initrd.img"

[ -z "$(awk -v p="$root" 'index($5, p) == 1' /proc/self/mountinfo)" ] ||
  { echo "node-image: still mounted under $root" >&2; exit 1; }
timed "disk (mkfs.ext4 -d)" mkfs.ext4 -q -F -L nstarget-node -d "$root" "$tmp/disk.img" 3G
rm -rf --one-file-system "$root" "$out"
mv "$tmp" "$out"
trap - EXIT
echo "node-image: done in ${SECONDS}s: $out ($(du -sh --apparent-size "$out/disk.img" | cut -f1) apparent, $(du -sh "$out/disk.img" | cut -f1) used)"
echo "$out" >&3
