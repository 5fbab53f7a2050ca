#!/usr/bin/env bash
# Builds runc from the Go module proxy into a cache dir and prints the
# directory holding the binary. Idempotent: when the cached binary reports the
# wanted version it only prints the directory.
#
#   hack/runc.sh            # -> /var/cache/cri-nstarget/runc-v1.5.2/bin
#   RUNC_VERSION=v1.5.2 RUNC_CACHE=/some/dir hack/runc.sh
#
# As hack/containerd.sh does, the module's own source is copied out of the
# module cache and built as the main module, so its go.mod and go.sum pick the
# dependencies. The build follows upstream's `make runc` (cgo, dynamic PIE,
# -trimpath) with the tags "seccomp urfave_cli_no_docs": no libpathrs (a Rust
# library Debian does not ship), so runc uses its pure-Go path resolution.
# seccomp needs libseccomp-dev (and pkg-config), installed from Debian when
# missing (as root).
set -euo pipefail
version=${RUNC_VERSION:-v1.5.2}
cache=${RUNC_CACHE:-/var/cache/cri-nstarget}
out="$cache/runc-$version/bin"
mod=github.com/opencontainers/runc

# The output is read whole before grep sees it: piped into `grep -q` under
# pipefail, runc (several writes) dies of SIGPIPE after grep's match and the
# check failed about one time in three, rebuilding runc (hack/kubernetes.sh).
if [ -x "$out/runc" ] && have=$("$out/runc" --version 2>/dev/null) && grep -q "^runc version ${version#v}$" <<<"$have"; then
  echo "$out"
  exit 0
fi

command -v go >/dev/null || { echo "runc: go not found" >&2; exit 1; }
need=()
for pkg in libseccomp-dev pkg-config; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || need+=("$pkg")
done
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "runc: missing ${need[*]}; run as root (apt-get install ${need[*]})" >&2
    exit 1
  fi
  echo "runc: installing ${need[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
src=$(go mod download -json "$mod@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
[ -d "$src" ] || { echo "runc: module $mod@$version not downloaded" >&2; exit 1; }

work=$(mktemp -d /tmp/runc-build.XXXXXX)
trap 'rm -rf "$work"' EXIT
cp -r "$src" "$work/src"
chmod -R u+w "$work/src"
cd "$work/src"
echo "runc: building $mod@$version into $out" >&2
mkdir -p "$out.tmp"
GOFLAGS=-mod=mod CGO_ENABLED=1 go build -trimpath -buildmode=pie -tags "seccomp urfave_cli_no_docs" \
  -ldflags "-X main.gitCommit=module-proxy" -o "$out.tmp/runc" .
rm -rf "$out"
mv "$out.tmp" "$out"
"$out/runc" --version >&2
echo "$out"
