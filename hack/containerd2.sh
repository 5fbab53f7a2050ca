#!/usr/bin/env bash
# Builds containerd 2.x (containerd and containerd-shim-runc-v2) from the Go
# module proxy into a cache dir and prints the directory holding the binaries.
# Idempotent: when the cached binaries report the wanted version it only
# prints the directory.
#
#   hack/containerd2.sh            # -> /var/cache/cri-nstarget/containerd-v2.4.2/bin
#   CONTAINERD2_VERSION=v2.1.4 hack/containerd2.sh   # -> .../containerd-v2.1.4/bin
#   CONTAINERD2_VERSION=v2.1.4 CONTAINERD2_CACHE=/some/dir hack/containerd2.sh
#
# `go install ...@v2.1.4` is refused (containerd's go.mod has exclude
# directives), so the module's own source is copied out of the module cache
# and built as the main module: its go.mod and go.sum pick the dependencies,
# exactly as upstream's release build does. Build tags drop the snapshotters
# that need cgo libraries (btrfs, devmapper, zfs).
set -euo pipefail
version=${CONTAINERD2_VERSION:-v2.4.2}
cache=${CONTAINERD2_CACHE:-/var/cache/cri-nstarget}
out="$cache/containerd-$version/bin"
mod=github.com/containerd/containerd/v2

if [ -x "$out/containerd" ] && [ -x "$out/containerd-shim-runc-v2" ] &&
  have=$("$out/containerd" --version 2>/dev/null) && grep -q " $version " <<<"$have"; then
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "containerd2: go not found" >&2; exit 1; }
src=$(go mod download -json "$mod@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "containerd2: module $mod@$version not downloaded" >&2; exit 1; }

work=$(mktemp -d /tmp/containerd2-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"
cd "$work/src"
ldflags="-s -w -X $mod/version.Version=$version -X $mod/version.Revision=module-proxy -X $mod/version.Package=$mod"
echo "containerd2: building $mod@$version into $out (takes a few minutes the first time)" >&2
mkdir -p "$out.tmp"
GOFLAGS=-mod=mod CGO_ENABLED=1 go build -trimpath -tags "no_btrfs no_devmapper no_zfs" -ldflags "$ldflags" \
  -o "$out.tmp/" ./cmd/containerd ./cmd/containerd-shim-runc-v2
rm -rf "$out"
mv "$out.tmp" "$out"
"$out/containerd" --version >&2
echo "$out"
