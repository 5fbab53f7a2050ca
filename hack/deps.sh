#!/usr/bin/env bash
# Installs what the tests and the private containerd need, on Debian, as root:
# containerd and runc (the real backend), busybox-static (test images are
# built from it), util-linux (unshare, used by a namespaces test), systemd
# (systemd-analyze verify, for make install-check; works without systemd as
# PID 1), and for the pod network critest needs: iptables, iproute2 and
# containernetworking-plugins (the bridge, host-local and portmap plugins);
# for make release-check: lintian, rpm (reads the .rpm), file and dpkg-dev (dpkg-parsechangelog). Go modules come from the module proxy. Idempotent: does nothing
# when all is present.
set -euo pipefail
need=()
for pair in containerd:containerd runc:runc busybox:busybox-static unshare:util-linux systemd-analyze:systemd \
    iptables:iptables ip:iproute2 /usr/lib/cni/bridge:containernetworking-plugins \
    lintian:lintian rpm:rpm file:file dpkg-parsechangelog:dpkg-dev; do
  cmd=${pair%%:*} pkg=${pair#*:}
  if [[ $cmd == /* ]]; then [ -x "$cmd" ] || need+=("$pkg"); continue; fi
  command -v "$cmd" >/dev/null 2>&1 || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "deps: missing ${need[*]}; run as root (apt-get install ${need[*]})" >&2
    exit 1
  fi
  echo "deps: installing ${need[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
go mod download
