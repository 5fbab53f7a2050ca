#!/usr/bin/env bash
# Builds a static busybox with upstream's default config (which, unlike
# Debian's busybox-static, has ipcs, pgrep, pkill and the other applets some
# critest specs exec) from Debian's busybox source package, into a cache dir,
# and prints the binary's path. Idempotent: a cached binary is only printed.
#
# The source comes through apt (deb-src of the machine's own Debian suites),
# using a private sources list and lists dir: the machine's apt configuration
# is not changed.
set -euo pipefail
cache=${BUSYBOX_CACHE:-/var/cache/cri-nstarget}
out="$cache/busybox-full/busybox"
# The list is read whole before it is searched: with `busybox --list | grep -q`,
# grep leaves at its match while busybox still writes (a write a line), busybox
# dies of SIGPIPE, pipefail fails the check, and a good binary was built again
# (9 of 300 checks here; each rebuild a new binary, so a new image digest and a
# missed critest direct cache).
if [ -x "$out" ] && list=$("$out" --list) && grep -qx ipcs <<<"$list" && grep -qx pgrep <<<"$list"; then
  echo "$out"
  exit 0
fi
for tool in gcc make dpkg-source bzip2; do
  command -v "$tool" >/dev/null || missing+=" $tool"
done
if [ -n "${missing:-}" ]; then
  echo "busybox-full: installing build tools:$missing" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends build-essential dpkg-dev bzip2 >/dev/null
fi

work=$(mktemp -d /tmp/busybox-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/lists/partial" "$work/parts"
# deb-src lines for the suites the machine already uses.
sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources > "$work/parts/src.sources"
apt_opts=(-o "Dir::Etc::SourceList=/dev/null" -o "Dir::Etc::SourceParts=$work/parts"
  -o "Dir::State::Lists=$work/lists" -o "Dir::Cache::pkgcache=" -o "Dir::Cache::srcpkgcache=" -o "APT::Sandbox::User=root")
echo "busybox-full: fetching Debian's busybox source" >&2
apt-get "${apt_opts[@]}" update -qq >&2
(cd "$work" && apt-get "${apt_opts[@]}" source -qq busybox >&2)
src=$(find "$work" -mindepth 1 -maxdepth 1 -type d -name 'busybox-*' | head -1)
[ -d "$src" ] || { echo "busybox-full: no source tree" >&2; exit 1; }
cd "$src"
echo "busybox-full: building $(basename "$src") (defconfig, static)" >&2
make -s defconfig >/dev/null
sed -i 's/^# CONFIG_STATIC is not set$/CONFIG_STATIC=y/' .config
# tc needs kernel CBQ headers some kernels lack; critest does not use it.
sed -i 's/^CONFIG_TC=y$/# CONFIG_TC is not set/' .config
make -s oldconfig < <(yes '') >/dev/null
make -s -j"$(nproc)" busybox >/dev/null 2>"$work/build.log" || { tail -30 "$work/build.log" >&2; exit 1; }
mkdir -p "$(dirname "$out")"
install -m 0755 busybox "$out.tmp"
mv "$out.tmp" "$out"
echo "$out"
