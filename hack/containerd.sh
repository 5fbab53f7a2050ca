#!/usr/bin/env bash
# Builds containerd (containerd and containerd-shim-runc-v2) of one release
# from the Go module proxy into a cache dir and prints the directory holding
# the binaries. Idempotent: when the cached binaries report the wanted
# version it only prints the directory. 1.x releases are the module
# github.com/containerd/containerd, 2.x github.com/containerd/containerd/v2.
#
#   CONTAINERD_VERSION=v2.4.2 hack/containerd.sh    # -> /var/cache/cri-nstarget/containerd-v2.4.2/bin
#   CONTAINERD_VERSION=v1.7.35 hack/containerd.sh   # -> .../containerd-v1.7.35/bin
#   CONTAINERD_VERSION=v2.3.7 CONTAINERD_CACHE=/some/dir hack/containerd.sh
#
# The versions `make test` uses are named once, in the Makefile.
#
# `go install ...@VERSION` is refused (containerd's go.mod has exclude
# directives), so the module's own source is copied out of the module cache
# and built as the main module: its go.mod and go.sum pick the dependencies,
# exactly as upstream's release build does. Build tags drop the snapshotters
# that need cgo libraries (btrfs, devmapper, zfs).
set -euo pipefail
version=${CONTAINERD_VERSION:?set CONTAINERD_VERSION (the Makefile names them)}
cache=${CONTAINERD_CACHE:-/var/cache/cri-nstarget}
out="$cache/containerd-$version/bin"
case "$version" in
v1.*) mod=github.com/containerd/containerd ;;
v2.*) mod=github.com/containerd/containerd/v2 ;;
*) echo "containerd: $version is not a v1.x or v2.x release" >&2; exit 1 ;;
esac

# The output is read whole before grep sees it (hack/runc.sh says why).
if [ -x "$out/containerd" ] && [ -x "$out/containerd-shim-runc-v2" ] &&
  have=$("$out/containerd" --version 2>/dev/null) && grep -q " $version " <<<"$have"; then
  echo "$out"
  exit 0
fi

# One build per release at a time: a second call waits, then finds it built.
mkdir -p "$cache"
exec 9>"$cache/containerd-$version.lock"
flock 9
if [ -x "$out/containerd" ] && [ -x "$out/containerd-shim-runc-v2" ] &&
  have=$("$out/containerd" --version 2>/dev/null) && grep -q " $version " <<<"$have"; then
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "containerd: go not found" >&2; exit 1; }
src=$(go mod download -json "$mod@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "containerd: module $mod@$version not downloaded" >&2; exit 1; }

work=$(mktemp -d /tmp/containerd-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"
cd "$work/src"
ldflags="-s -w -X $mod/version.Version=$version -X $mod/version.Revision=module-proxy -X $mod/version.Package=$mod"
tags="no_btrfs no_devmapper no_zfs"
export GOFLAGS=-mod=mod CGO_ENABLED=1
# The progress of a build that takes minutes (make run's first start): go
# build -v names each package it compiles; every 50th is counted aloud
# against the packages the binaries import (those already in Go's build cache
# are not compiled again, so the count may end below it).
echo "containerd: building $mod@$version into $out, once: a few minutes; its progress follows" >&2
total=$(go list -deps -tags "$tags" ./cmd/containerd ./cmd/containerd-shim-runc-v2 | wc -l)
progress() {
  local n=0 line
  while IFS= read -r line; do
    if [[ $line =~ ^[[:alnum:]._~/-]+$ ]]; then
      n=$((n + 1))
      if ((n % 50 == 0)); then echo "containerd: $n of up to $total packages compiled (${SECONDS}s)"; fi
    else
      echo "$line"
    fi
  done
}
SECONDS=0
mkdir -p "$out.tmp"
go build -v -trimpath -tags "$tags" -ldflags "$ldflags" -o "$out.tmp/" ./cmd/containerd ./cmd/containerd-shim-runc-v2 2>&1 |
  progress >&2
rm -rf "$out"
mv "$out.tmp" "$out"
"$out/containerd" --version >&2
echo "$out"
