#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: the release artifacts, into $DIST (dist/):
#   cri-nstarget-VERSION-linux-ARCH               static binary (CGO off, -trimpath)
#   cri-nstarget-VERSION-linux-ARCH.tar.gz        `make install`'s tree (PREFIX=/usr/local):
#                                                 tar -C / -xzf it is `make install`
#   cri-nstarget-VERSION-linux-ARCH.tar.gz.sha256sum
#   cri-nstarget_X.Y.Z_ARCH.deb, cri-nstarget-X.Y.Z-1.RPMARCH.rpm
#                                                 `make install PREFIX=/usr`'s tree, packaged
#                                                 by nfpm (packaging/nfpm.yaml)
#   cri-nstarget-image-VERSION.oci.tar            the cluster install's image (make image):
#   cri-nstarget-image-VERSION-linux-ARCH.tar     an OCI layout of every ARCH, and each ARCH
#                                                 as a docker tarball
#   SHA256SUMS                                    every file above: sha256sum -c SHA256SUMS
# for ARCH in $RELEASE_ARCHES (amd64 arm64). The binaries are built by `make
# install` itself (with GOARCH and friends in its environment), stamped with
# VERSION, the commit and the commit's date; every date in the archives is
# the commit's (SOURCE_DATE_EPOCH), so a commit builds the same bytes twice
# (hack/release-check.sh builds twice and compares).
# A tree with changed tracked files is refused (the artifacts would not be the
# commit's) unless ALLOW_DIRTY=1; the commit stamp then ends in -dirty.
set -euo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
MAKE=${MAKE:-make}
version=${VERSION:-}
dist=${DIST:-dist}
arches=${RELEASE_ARCHES:-amd64 arm64}
maintainer=${RELEASE_MAINTAINER:-cri-nstarget maintainers <maintainers@users.noreply.a-seed-e31ab51b.example>}
die() { echo "release: $*" >&2; exit 1; }

[[ $version =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.]+)?$ ]] ||
  die "VERSION=${version:-(empty)}: want vX.Y.Z or vX.Y.Z-PRERELEASE, e.g. make release VERSION=v0.1.0"
commit=$(git rev-parse HEAD) || die "not a git checkout"
if ! git diff --quiet HEAD --; then
  [ "${ALLOW_DIRTY:-0}" = 1 ] || die "tracked files differ from $commit (git status); commit them, or ALLOW_DIRTY=1 to try it out"
  commit=$commit-dirty
fi
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct)}
date=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)

work=$(mktemp -d /tmp/nst-release.XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir -p bin
(cd hack/nfpm && "$GO" build -o ../../bin/nfpm github.com/goreleaser/nfpm/v2/cmd/nfpm)
rm -rf "$dist"
mkdir -p "$dist"

# install ARCH DESTDIR [PREFIX]: `make install` with the release build's
# environment; the binary it builds is left at $work/ARCH/cri-nstarget.
install_tree() {
  local arch=$1 dest=$2 prefix=${3:-/usr/local}
  # -buildvcs=false: the stamps carry the commit; vcs.modified would make an
  # untracked file change the bytes. GOAMD64/GOARM64: the baseline, whatever
  # the builder's environment says. -s -w: stripped, as Debian wants (Go's
  # stack traces need neither the symbol table nor DWARF).
  env CGO_ENABLED=0 GOOS=linux GOARCH="$arch" GOAMD64=v1 GOARM64=v8.0 GOFLAGS="-trimpath -buildvcs=false" \
    "$MAKE" --no-print-directory -s install DESTDIR="$dest" PREFIX="$prefix" \
    BIN="$work/$arch/cri-nstarget" INSTALL_OUT="$work/$arch/out" \
    VERSION="$version" COMMIT="$commit" BUILD_DATE="$date" EXTRA_LDFLAGS="-s -w" >"$work/make.log" 2>&1 ||
    { cat "$work/make.log" >&2; die "make install ($arch, PREFIX=$prefix) failed"; }
}

# The changelog Debian wants beside the copyright: one entry, this release.
# nfpm's Debian version of v1.2.3-rc.1 is 1.2.3~rc.1-1.
debian_changelog() {
  local v=${version#v}
  v=${v/-/\~}
  printf 'cri-nstarget (%s-1) unstable; urgency=medium\n\n  * Release %s, commit %s.\n    README.md and docs/operations.md say what it does.\n\n -- %s  %s\n' \
    "$v" "$version" "$commit" "$maintainer" "$(date -u -R -d "@$SOURCE_DATE_EPOCH")"
}

for arch in $arches; do
  echo "release: $version linux/$arch (commit $commit, $date)"
  name=cri-nstarget-$version-linux-$arch

  # The tarball: make install's tree, default PREFIX, owned by root, every
  # date the commit's, in name order, gzip without a name or time.
  install_tree "$arch" "$work/$arch/tar"
  cp "$work/$arch/cri-nstarget" "$dist/$name"
  chmod 0755 "$dist/$name"
  tar -C "$work/$arch/tar" --sort=name --owner=0 --group=0 --numeric-owner \
    --mtime="@$SOURCE_DATE_EPOCH" --mode=u+w,go-w,a+rX --format=gnu -cf - etc usr | gzip -9n >"$dist/$name.tar.gz"
  (cd "$dist" && sha256sum "$name.tar.gz" >"$name.tar.gz.sha256sum")

  # The packages: make install's tree for PREFIX=/usr; the binary is the
  # same build (the same bytes: the prefix is not in it).
  install_tree "$arch" "$work/$arch/pkg" /usr
  cmp -s "$work/$arch/cri-nstarget" "$dist/$name" || die "$arch: the package's binary differs from the tarball's"
  mkdir -p "$work/$arch/extra"
  gzip -9n <"$work/$arch/pkg/usr/share/man/man8/cri-nstarget.8" >"$work/$arch/extra/cri-nstarget.8.gz"
  debian_changelog | gzip -9n >"$work/$arch/extra/changelog.Debian.gz"
  for packager in deb rpm; do
    VERSION=$version ARCH=$arch STAGE="$work/$arch/pkg" EXTRA="$work/$arch/extra" MAINTAINER=$maintainer \
      bin/nfpm package --config packaging/nfpm.yaml --packager "$packager" --target "$dist/" >"$work/nfpm.log" 2>&1 ||
      { cat "$work/nfpm.log" >&2; die "nfpm $packager ($arch) failed"; }
  done
done
# The cluster install's image (make image, docs/cluster-install.md): the same
# build of each binary (the shim's bytes compared with the one above), as an
# OCI layout of every architecture in one tar, and a docker tarball of each.
"$MAKE" --no-print-directory -s image VERSION="$version" COMMIT="$commit" BUILD_DATE="$date" \
  IMAGE_ARCHES="$arches" IMAGE_OUT="$work/image" >"$work/make.log" 2>&1 ||
  { cat "$work/make.log" >&2; die "make image failed"; }
for arch in $arches; do
  cmp -s "$work/image/$arch/cri-nstarget" "$dist/cri-nstarget-$version-linux-$arch" ||
    die "$arch: the image's cri-nstarget differs from the release's binary"
done
cp "$work/image"/cri-nstarget-image-*.tar "$dist/"
(cd "$dist" && find . -maxdepth 1 -type f ! -name SHA256SUMS ! -name '*.sha256sum' -printf '%P\n' | LC_ALL=C sort |
  xargs sha256sum >SHA256SUMS)
echo "release: $dist/"
(cd "$dist" && ls -l | tail -n +2)
