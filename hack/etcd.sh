#!/usr/bin/env bash
# Fetches Debian's etcd-server package into a cache dir, unpacks it there and
# prints the directory holding the etcd binary (make e2e's control plane).
# Idempotent: when the cached etcd reports the wanted version it only prints
# the directory.
#
#   hack/etcd.sh            # -> /var/cache/cri-nstarget/etcd-3.4.23-4+b4/usr/bin
#
# The package is downloaded (apt-get download) and unpacked with dpkg-deb,
# never installed: no etcd user, no /etc/default/etcd, no system etcd
# started by the package's scripts. Its runtime needs (libc6) are on every
# Debian machine.
set -euo pipefail
cache=${ETCD_CACHE:-/var/cache/cri-nstarget}
candidate() { apt-cache policy etcd-server 2>/dev/null | sed -n 's/^[[:space:]]*Candidate: //p'; }
version=$(candidate)
if [ -z "$version" ] || [ "$version" = "(none)" ]; then
  [ "$(id -u)" = 0 ] || { echo "etcd: apt has no etcd-server; run as root (apt-get update)" >&2; exit 1; }
  apt-get update -qq
  version=$(candidate)
fi
[ -n "$version" ] && [ "$version" != "(none)" ] || { echo "etcd: no etcd-server package in apt's sources" >&2; exit 1; }
out="$cache/etcd-$version/usr/bin"
upstream=${version%%-*}
# The output is read whole before grep sees it: piped into `grep -q` under
# pipefail, a program that writes after grep's match dies of SIGPIPE and the
# check fails at random (hack/kubernetes.sh says more).
if [ -x "$out/etcd" ] && have=$("$out/etcd" --version 2>/dev/null) && grep -q "^etcd Version: $upstream$" <<<"$have"; then
  echo "$out"
  exit 0
fi

work=$(mktemp -d /tmp/etcd-fetch.XXXXXX)
chmod 755 "$work" # apt-get download runs as _apt where it can
trap 'rm -rf "$work"' EXIT
echo "etcd: fetching Debian's etcd-server $version into $cache/etcd-$version" >&2
(cd "$work" && apt-get download -qq "etcd-server=$version" >/dev/null)
rm -rf "$cache/etcd-$version.tmp"
mkdir -p "$cache/etcd-$version.tmp"
dpkg-deb -x "$work"/etcd-server_*.deb "$cache/etcd-$version.tmp"
rm -rf "$cache/etcd-$version"
mv "$cache/etcd-$version.tmp" "$cache/etcd-$version"
"$out/etcd" --version >&2
echo "$out"
