#!/usr/bin/env bash
# make release VERSION=vX.Y.Z: the release artifacts, into $DIST (dist/):
#   RELEASE-NOTES.md                              CHANGELOG.md's entry for VERSION, then how to
#                                                 install and check what follows
#   cri-nstarget-VERSION-linux-ARCH               static binary (CGO off, -trimpath)
#   cri-nstarget-VERSION-linux-ARCH.tar.gz        `make install`'s tree (PREFIX=/usr/local):
#                                                 tar -C / -xzf it is `make install`
#   cri-nstarget-VERSION-linux-ARCH.tar.gz.sha256sum
#   cri-nstarget_X.Y.Z-1_ARCH.deb, cri-nstarget-X.Y.Z-1.RPMARCH.rpm
#                                                 `make install PREFIX=/usr`'s tree, packaged
#                                                 by nfpm (packaging/nfpm.yaml)
#   cri-nstarget-image-VERSION.oci.tar            the cluster install's image (make image):
#   cri-nstarget-image-VERSION-linux-ARCH.tar     an OCI layout of every ARCH, and each ARCH
#                                                 as a docker tarball
#   cri-nstarget-deploy-VERSION.tar.gz, its .sha256sum
#                                                 deploy/ (kubectl apply -k), and the Helm chart
#   cri-nstarget-X.Y.Z.tgz                        (helm package's archive, version X.Y.Z), both
#                                                 naming the image by VERSION and the digest of
#                                                 its OCI index (bin/nstarget-chart, hack/chart)
#   nstarget-conformance-VERSION-linux-ARCH, its .tar.gz and .tar.gz.sha256sum,
#   cri-nstarget-conformance_X.Y.Z-1_ARCH.deb, cri-nstarget-conformance-X.Y.Z-1.RPMARCH.rpm
#                                                 the TARGET suite the same way, from `make
#                                                 install-conformance` (packaging/nfpm-conformance.yaml):
#                                                 a package of its own, which a node does not need
#   SHA256SUMS                                    every file above: sha256sum -c SHA256SUMS
# for ARCH in $RELEASE_ARCHES (amd64 arm64). The binaries are built by `make
# install` and `make install-conformance` themselves (with GOARCH and friends
# in their environment), stamped with VERSION, the commit and the commit's
# date; every date in the archives is the commit's (SOURCE_DATE_EPOCH), so a
# commit builds the same bytes twice (hack/release-check.sh builds twice and
# compares).
# The words come from CHANGELOG.md (cmd/nstarget-changelog): VERSION must have
# its entry there (## [X.Y.Z] - YYYY-MM-DD, Keep a Changelog's form). It becomes the release notes, the
# .debs' changelog.Debian.gz (with the older entries, in Debian's format) and
# the .rpms' %changelog. A test build of a prerelease (vX.Y.Z-SOMETHING) may
# take the Unreleased section instead: UNRELEASED=1.
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
# The packages' version (nfpm's, in both formats): v1.2.3 is 1.2.3-1,
# v1.2.3-rc.1 is 1.2.3~rc.1-1.
debver=${version#v}
debver=${debver/-/\~}-1
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

# CHANGELOG.md first: a version without its entry stops here, before anything
# is built.
"$GO" build -o "$work/nstarget-changelog" ./cmd/nstarget-changelog
unreleased=()
if [ "${UNRELEASED:-0}" = 1 ]; then unreleased=(--unreleased --date "$SOURCE_DATE_EPOCH"); fi
changelog() { "$work/nstarget-changelog" "$1" "${unreleased[@]}" "${@:2}" "$version"; }
changelog check >/dev/null ||
  die "VERSION=$version has no entry in CHANGELOG.md (above): the release notes and the packages' changelogs are made from it"

(cd hack/nfpm && "$GO" build -o ../../bin/nfpm github.com/goreleaser/nfpm/v2/cmd/nfpm)
rm -rf "$dist"
mkdir -p "$dist"

# The release build's environment. -buildvcs=false: the stamps carry the
# commit; vcs.modified would make an untracked file change the bytes.
# GOAMD64/GOARM64: the baseline, whatever the builder's environment says.
release_env() {
  env CGO_ENABLED=0 GOOS=linux GOARCH="$1" GOAMD64=v1 GOARM64=v8.0 GOFLAGS="-trimpath -buildvcs=false" "${@:2}"
}

# install_tree ARCH DESTDIR [PREFIX]: `make install` with the release build's
# environment; the binary it builds is left at $work/ARCH/cri-nstarget. -s -w:
# stripped, as Debian wants (Go's stack traces need neither the symbol table
# nor DWARF).
install_tree() {
  local arch=$1 dest=$2 prefix=${3:-/usr/local}
  release_env "$arch" "$MAKE" --no-print-directory -s install DESTDIR="$dest" PREFIX="$prefix" \
    BIN="$work/$arch/cri-nstarget" INSTALL_OUT="$work/$arch/out" \
    VERSION="$version" COMMIT="$commit" BUILD_DATE="$date" EXTRA_LDFLAGS="-s -w" >"$work/make.log" 2>&1 ||
    { cat "$work/make.log" >&2; die "make install ($arch, PREFIX=$prefix) failed"; }
}

# install_suite ARCH DESTDIR [PREFIX]: `make install-conformance` the same
# way (its rule strips and stamps; CI's conformance legs run that rule's
# build); the binary is left at $work/ARCH/nstarget-conformance.
install_suite() {
  local arch=$1 dest=$2 prefix=${3:-/usr/local}
  release_env "$arch" "$MAKE" --no-print-directory -s install-conformance DESTDIR="$dest" PREFIX="$prefix" \
    CONFORMANCE_BIN="$work/$arch/nstarget-conformance" VERSION="$version" >"$work/make.log" 2>&1 ||
    { cat "$work/make.log" >&2; die "make install-conformance ($arch, PREFIX=$prefix) failed"; }
}

# tarball TREE FILE DIR...: the tree's DIRs, owned by root, every date the
# commit's, in name order, gzip without a name or time; and its .sha256sum.
tarball() {
  local tree=$1 file=$2
  shift 2
  tar -C "$tree" --sort=name --owner=0 --group=0 --numeric-owner \
    --mtime="@$SOURCE_DATE_EPOCH" --mode=u+w,go-w,a+rX --format=gnu -cf - "$@" | gzip -9n >"$dist/$file"
  (cd "$dist" && sha256sum "$file" >"$file.sha256sum")
}

# The packages' changelogs, from CHANGELOG.md: Debian's beside the copyright,
# each with its package's name; and nfpm's changelog file for the .rpms'
# %changelog, named in a copy of each nfpm config (nfpm would write it into a
# .deb too, where Debian's own goes instead).
changelog debian --package cri-nstarget --maintainer "$maintainer" | gzip -9n >"$work/changelog.Debian.gz"
changelog debian --package cri-nstarget-conformance --maintainer "$maintainer" | gzip -9n >"$work/suite-changelog.Debian.gz"
changelog rpm --maintainer "$maintainer" >"$work/changelog.rpm.yaml"
for cfg in nfpm nfpm-conformance; do
  { cat "packaging/$cfg.yaml"; echo "changelog: $work/changelog.rpm.yaml"; } >"$work/$cfg-rpm.yaml"
done

# package CONFIG ARCH STAGE EXTRA: the .deb and the .rpm that packaging/CONFIG.yaml
# describes, of the tree STAGE, with EXTRA's man page and changelog.
package() {
  local cfg=$1 arch=$2 stage=$3 extra=$4 packager config
  for packager in deb rpm; do
    config=packaging/$cfg.yaml
    if [ $packager = rpm ]; then config=$work/$cfg-rpm.yaml; fi
    VERSION=$version ARCH=$arch STAGE="$stage" EXTRA="$extra" MAINTAINER=$maintainer \
      bin/nfpm package --config "$config" --packager "$packager" --target "$dist/" >"$work/nfpm.log" 2>&1 ||
      { cat "$work/nfpm.log" >&2; die "nfpm $packager of packaging/$cfg.yaml ($arch) failed"; }
  done
}

for arch in $arches; do
  echo "release: $version linux/$arch (commit $commit, $date)"
  name=cri-nstarget-$version-linux-$arch

  # The tarball: make install's tree, default PREFIX.
  install_tree "$arch" "$work/$arch/tar"
  cp "$work/$arch/cri-nstarget" "$dist/$name"
  chmod 0755 "$dist/$name"
  tarball "$work/$arch/tar" "$name.tar.gz" etc usr

  # The packages: make install's tree for PREFIX=/usr; the binary is the
  # same build (the same bytes: the prefix is not in it).
  install_tree "$arch" "$work/$arch/pkg" /usr
  cmp -s "$work/$arch/cri-nstarget" "$dist/$name" || die "$arch: the package's binary differs from the tarball's"
  mkdir -p "$work/$arch/extra"
  gzip -9n <"$work/$arch/pkg/usr/share/man/man8/cri-nstarget.8" >"$work/$arch/extra/cri-nstarget.8.gz"
  cp "$work/changelog.Debian.gz" "$work/$arch/extra/"
  package nfpm "$arch" "$work/$arch/pkg" "$work/$arch/extra"

  # The TARGET suite the same way: its binary, tarball and packages.
  suite=nstarget-conformance-$version-linux-$arch
  install_suite "$arch" "$work/$arch/suite-tar"
  cp "$work/$arch/nstarget-conformance" "$dist/$suite"
  chmod 0755 "$dist/$suite"
  tarball "$work/$arch/suite-tar" "$suite.tar.gz" usr
  install_suite "$arch" "$work/$arch/suite-pkg" /usr
  cmp -s "$work/$arch/nstarget-conformance" "$dist/$suite" || die "$arch: the suite package's binary differs from the tarball's"
  mkdir -p "$work/$arch/suite-extra"
  gzip -9n <"$work/$arch/suite-pkg/usr/share/man/man8/nstarget-conformance.8" >"$work/$arch/suite-extra/nstarget-conformance.8.gz"
  cp "$work/suite-changelog.Debian.gz" "$work/$arch/suite-extra/changelog.Debian.gz"
  package nfpm-conformance "$arch" "$work/$arch/suite-pkg" "$work/$arch/suite-extra"
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

# The cluster install as released: deploy/ and the Helm chart with the
# image's tag, digest and version label written in (the tree's name none),
# each checked by nstarget-chart against the other as hack/chart's test
# checks the tree's. The digest is the index's, which `skopeo copy --all`
# of the .oci.tar keeps in a registry.
(cd hack/chart && "$GO" build -o ../../bin/nstarget-chart .)
bin/nstarget-chart --version "$version" --digest "$(cat "$work/image/digest")" --epoch "$SOURCE_DATE_EPOCH" \
  --out "$work/cluster" >"$work/chart.log" 2>&1 || { cat "$work/chart.log" >&2; die "nstarget-chart failed"; }
tarball "$work/cluster" "cri-nstarget-deploy-$version.tar.gz" deploy
cp "$work/cluster"/cri-nstarget-*.tgz "$dist/"

# The release notes: the version's entry, then how to install and check.
{
  changelog notes
  cat <<NOTES

## Install
The files for linux/amd64 are named below; for arm64 take \`arm64\` (\`aarch64\` in the \`.rpm\`'s
name). Check what you downloaded first: \`sha256sum -c --ignore-missing SHA256SUMS\`.

First the pre-flight, with the release's binary (each line ok, warn or fail, and what to do; exit 1
on a fail): the kernel, cgroups, containerd answering and its version, NRI, the socket, the config,
the kubelet's endpoint and version. The packages print it too when they install.
\`\`\`sh
install -m 0755 cri-nstarget-$version-linux-amd64 /tmp/cri-nstarget && /tmp/cri-nstarget check
\`\`\`

On a node with containerd, from a package or from containerd's release tarball (the packages
depend on no containerd package: they suggest \`containerd | containerd.io\`), as root:
\`\`\`sh
apt-get install ./cri-nstarget_${debver}_amd64.deb        # Debian, Ubuntu
dnf install ./cri-nstarget-${debver}.x86_64.rpm           # Fedora, RHEL and the like
tar -C / -xzf cri-nstarget-$version-linux-amd64.tar.gz     # make install's tree, under /usr/local
\`\`\`
An upgrade from the tarball keeps your configuration with \`--exclude=etc/cri-nstarget/config.toml\`.
The unit is installed, neither enabled nor started: \`systemctl enable --now cri-nstarget\`, then
point the kubelet at \`unix:///run/cri-nstarget/cri.sock\` (operations.md, in the documentation:
roll out, upgrade, roll back).

The TARGET conformance suite, for any CRI endpoint, is a package of its own (qualify.md):
\`\`\`sh
apt-get install ./cri-nstarget-conformance_${debver}_amd64.deb    # or its .rpm, or:
tar -C / -xzf nstarget-conformance-$version-linux-amd64.tar.gz
nstarget-conformance --help
\`\`\`

A cluster's nodes, from a DaemonSet (cluster-install.md): push the image
\`cri-nstarget-image-$version.oci.tar\` (every architecture; \`cri-nstarget-image-$version-linux-amd64.tar\`
is one in \`docker save\`'s format) to your registry with \`skopeo copy --all\`, which keeps its digest,
label the nodes \`cri-nstarget.io/install=true\`, then either unpack
\`cri-nstarget-deploy-$version.tar.gz\`, set your registry's name as \`newName\` in
deploy/install/kustomization.yaml and \`kubectl apply -k deploy/\`, or with Helm:
\`helm install cri-nstarget cri-nstarget-${version#v}.tgz --set image.repository=REGISTRY/cri-nstarget\`.
Both name the image by its tag and digest: it is pulled by the digest.

## Checksums
\`SHA256SUMS\` lists every file of the release, these notes included; each tarball also has its
own \`.sha256sum\`. The same commit builds the same bytes: \`make release VERSION=$version\`.
NOTES
} >"$dist/RELEASE-NOTES.md"

(cd "$dist" && find . -maxdepth 1 -type f ! -name SHA256SUMS ! -name '*.sha256sum' -printf '%P\n' | LC_ALL=C sort |
  xargs sha256sum >SHA256SUMS)
echo "release: $dist/"
(cd "$dist" && ls -l | tail -n +2)
