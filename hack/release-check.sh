#!/usr/bin/env bash
# make release-check: `make release` as CI can run it, then checks what it made:
#   - a second build, from a copy of the tree at another path, with another
#     umask, TZ and hostname, gives the same bytes, every artifact
#     (RELEASE_CHECK_COLD=1: with an empty Go build cache too, ~2.5 min more);
#   - SHA256SUMS and each tarball's .sha256sum verify (and a changed byte fails);
#   - the binaries are static ELF of their arch (the arm64 one aarch64), built
#     with CGO off and -trimpath, and print the version, commit and date;
#   - each tarball holds `make install`'s tree (PREFIX=/usr/local): the same
#     files, modes and contents (the binary aside), owned by root;
#   - each .deb and .rpm holds `make install PREFIX=/usr`'s tree (man page
#     gzipped) plus Debian's or RPM's own files, the config as a conffile,
#     and no hard dependency on containerd (only a suggestion: a node's
#     containerd may come from its tarball or containerd.io; packaging/nfpm_test.go
#     holds the config to the same); lintian reports no error on the .debs;
#   - the TARGET suite likewise: nstarget-conformance's binary (static, its
#     --version, --help, --list), its tarball (`make install-conformance`'s
#     tree) and its packages (cri-nstarget-conformance, depending on nothing);
#   - the release's deploy/ and Helm chart name the image by the digest of
#     the OCI index in its .oci.tar;
#   - the words come from CHANGELOG.md: the release notes are the version's
#     entry, each .deb's changelog.Debian.gz parses (dpkg-parsechangelog) and
#     holds that entry and the older ones, each .rpm's %changelog likewise,
#     and make release refuses a version without an entry;
#   - on a node whose containerd came from containerd's release tarball (no
#     containerd package: made so in the overlay), `apt-get install ./the.deb`
#     installs it downloading nothing, and its postinst prints `cri-nstarget
#     check`'s lines (containerd not answering there) without failing;
#   - the amd64 .deb installs, reinstalls (a changed config kept), removes (the
#     config kept) and purges (nothing left) with dpkg; the unit is neither
#     enabled nor started by it; the .rpm installs and erases with rpm (its
#     scripts under sh; an empty rpm database); then the image-baker recipes of
#     docs/node-images.md (the Packer provisioner script, the kind Dockerfile's
#     RUN steps on a slim image that drops /usr/share/doc) install, enable and
#     purge cleanly. All of this runs in a private mount namespace on an
#     overlay of / whose writes go to a tmpfs: dpkg sees this machine's
#     packages (containerd is installed by hack/deps.sh), and the machine is
#     left as it was, which is checked too.
# Needs root (the overlay), dpkg, lintian, rpm, file (hack/deps.sh installs
# them). Prints "N passed, N failed" and exits non-zero on a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
GO=${GO:-go}
work=$(mktemp -d /tmp/nst-release-check.XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck source=hack/check-lib.sh
. hack/check-lib.sh
for tool in dpkg-deb dpkg-parsechangelog lintian rpm file unshare; do
  command -v $tool >/dev/null || { echo "release-check: $tool is missing (make deps installs it)"; exit 1; }
done
# The version built is CHANGELOG.md's newest release: what `make release`
# would be asked for next, with the notes and changelogs it would ship.
"$GO" build -o "$work/nstarget-changelog" ./cmd/nstarget-changelog
version=$("$work/nstarget-changelog" newest) ||
  { echo "release-check: CHANGELOG.md has no release to build: it needs an entry \"## [X.Y.Z] - YYYY-MM-DD\" (make release VERSION=vX.Y.Z builds that one)"; exit 1; }
debver=${version#v}
debver=${debver/-/\~}-1
rpmver=$debver

# --- two builds ----------------------------------------------------------
# Both from snapshots of this tree, taken at once: clones of HEAD plus the
# tree's changes and untracked files, so that they hold the same sources
# whether or not the tree is clean, and whatever is edited or committed here
# meanwhile. Everything below checks the first snapshot.
repo=$PWD
commit=$(git rev-parse HEAD)
git diff "$commit" --binary >"$work/tree.diff"
git ls-files -z --others --exclude-standard | tar --null -T - -cf "$work/untracked.tar"
snapshot() {
  mkdir -p "$(dirname "$1")"
  git clone -q --shared "$repo" "$1"
  git -C "$1" checkout -q --detach "$commit"
  (cd "$1" && git apply --allow-empty "$work/tree.diff" && tar -xf "$work/untracked.tar")
}
src1=$work/src src2=$work/other/path/src
snapshot "$src1"
snapshot "$src2"
cd "$src1"
a=$work/a b=$work/b
# The two builds run side by side (each links, packs and compresses on its
# own, mostly one core at a time; neither reads the other's output), as apart
# as before: their own trees, DIST, environment and, with
# RELEASE_CHECK_COLD=1, build cache.
echo "build 1: make release VERSION=$version, CHANGELOG.md's newest (commit $commit and this tree's changes, in $src1)"
ALLOW_DIRTY=1 "$MAKE" --no-print-directory -s release VERSION=$version DIST="$a" >"$work/build1.log" 2>&1 &
build1=$!
cache=()
if [ "${RELEASE_CHECK_COLD:-0}" = 1 ]; then cache=(GOCACHE="$work/gocache"); fi
echo "build 2: the same from $src2 (umask 077, TZ, hostname${cache:+, an empty build cache}), beside build 1"
(cd "$src2" && umask 077 && env "${cache[@]}" TZ=Pacific/Kiritimati ALLOW_DIRTY=1 \
  unshare --uts sh -c 'hostname other-builder && "$0" --no-print-directory -s release VERSION="$1" DIST="$2"' "$MAKE" "$version" "$b") \
  >"$work/build2.log" 2>&1 &
build2=$!
wait "$build1" || { cat "$work/build1.log"; echo "release-check: make release failed"; wait "$build2"; exit 1; }
wait "$build2" || { cat "$work/build2.log"; echo "release-check: the second make release failed"; exit 1; }
sums() { (cd "$1" && sha256sum $(ls | LC_ALL=C sort)); }
check "two builds give identical bytes (every artifact, SHA256SUMS included)" diff <(sums "$a") <(sums "$b")
ls "$a" | sed 's/^/      /'

# --- checksums -------------------------------------------------------------
check "SHA256SUMS verifies" bash -c "cd '$a' && sha256sum --quiet -c SHA256SUMS"
check "SHA256SUMS lists every artifact" diff <(cd "$a" && ls | grep -v -e '^SHA256SUMS$' -e '\.sha256sum$') <(awk '{print $2}' "$a/SHA256SUMS")
for arch in amd64 arm64; do
  for t in cri-nstarget-$version-linux-$arch.tar.gz nstarget-conformance-$version-linux-$arch.tar.gz; do
    check "$t.sha256sum verifies" bash -c "cd '$a' && sha256sum --quiet -c $t.sha256sum"
  done
done
cp "$a/cri-nstarget-$version-linux-amd64.tar.gz" "$work/bad.tar.gz"
printf 'x' | dd of="$work/bad.tar.gz" bs=1 seek=1000 conv=notrunc status=none
sed "s|cri-nstarget-$version-linux-amd64.tar.gz|bad.tar.gz|" "$a/cri-nstarget-$version-linux-amd64.tar.gz.sha256sum" >"$work/bad.sha256sum"
check "a changed byte fails the check (the check can fail)" bash -c "cd '$work' && ! sha256sum --quiet -c bad.sha256sum 2>/dev/null"

# --- binaries ----------------------------------------------------------------
elf() { # elf FILE WANT: file(1) says WANT, statically linked
  local f; f=$(file -b "$1"); grep -q "$2" <<<"$f" && grep -q 'statically linked' <<<"$f" || { echo "$f"; return 1; }
}
for prog in cri-nstarget nstarget-conformance; do
  check "$prog: the amd64 binary is a static x86-64 ELF" elf "$a/$prog-$version-linux-amd64" 'ELF 64-bit LSB executable, x86-64'
  check "$prog: the arm64 binary is a static aarch64 ELF" elf "$a/$prog-$version-linux-arm64" 'ELF 64-bit LSB executable, ARM aarch64'
done
for arch in amd64 arm64; do
  for bin in "$a/cri-nstarget-$version-linux-$arch" "$a/nstarget-conformance-$version-linux-$arch"; do
    check "$(basename "$bin"): built with CGO off, -trimpath, for linux/$arch" bash -c \
      "m=\$('$GO' version -m '$bin') && grep -q 'CGO_ENABLED=0' <<<\"\$m\" && grep -q -- '-trimpath=true' <<<\"\$m\" && grep -q 'GOARCH=$arch' <<<\"\$m\" || { echo \"\$m\"; false; }"
    check "$(basename "$bin"): no build path in the binary" bash -c "! grep -a -q -e '$repo' -e '$work' '$bin'"
  done
done
check "--version: the version, the commit, the commit's date" bash -c \
  "out=\$('$a/cri-nstarget-$version-linux-amd64' --version) && grep -q '^cri-nstarget $version (commit $commit\(-dirty\)\?, built $(TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ);' <<<\"\$out\" || { echo \"\$out\"; false; }"
suite=$a/nstarget-conformance-$version-linux-amd64
check "nstarget-conformance --version: the version" bash -c \
  "out=\$('$suite' --version) && grep -q '^nstarget-conformance $version (' <<<\"\$out\" || { echo \"\$out\"; false; }"
check "nstarget-conformance --help: exit 0, how to point it at containerd, CRI-O and the shim" bash -c \
  "out=\$('$suite' --help) && for s in unix:///run/containerd/containerd.sock unix:///var/run/crio/crio.sock unix:///run/cri-nstarget/cri.sock --test-image --cases; do grep -q -- \"\$s\" <<<\"\$out\" || { echo \"no \$s in:\"; echo \"\$out\"; exit 1; }; done"
check "nstarget-conformance without an endpoint: exit 2, saying so" bash -c \
  "out=\$('$suite' 2>&1); rc=\$?; [ \$rc = 2 ] && grep -q 'runtime-endpoint is required' <<<\"\$out\" || { echo \"exit \$rc\"; echo \"\$out\" | head -3; false; }"
check "nstarget-conformance --list: every case, pid-target first" bash -c \
  "out=\$('$suite' --list) && [ \$(wc -l <<<\"\$out\") -ge 20 ] && head -1 <<<\"\$out\" | grep -q '^pid-target ' || { echo \"\$out\"; false; }"

# --- the tarball: make install's tree --------------------------------------------
files() { (cd "$1" && find . -type f -printf '%m %P\n' | sed 's/^\([0-7][0-7][0-7]\) /0\1 /' | LC_ALL=C sort); }
quiet_make() { "$MAKE" --no-print-directory -s "$@" INSTALL_OUT="$work/install-out" >"$work/make.log" 2>&1 || { cat "$work/make.log"; return 1; }; }
quiet_make install DESTDIR="$work/install-local"
quiet_make install DESTDIR="$work/install-usr" PREFIX=/usr
quiet_make install-conformance DESTDIR="$work/suite-local" CONFORMANCE_BIN="$work/suite-bin"
quiet_make install-conformance DESTDIR="$work/suite-usr" PREFIX=/usr CONFORMANCE_BIN="$work/suite-bin"
for arch in amd64 arm64; do
  t=$work/tar-$arch
  mkdir -p "$t" && tar -C "$t" -xzf "$a/cri-nstarget-$version-linux-$arch.tar.gz"
  check "$arch tarball: make install's files and modes" diff <(files "$work/install-local") <(files "$t")
  check "$arch tarball: the same contents as make install's (the binary aside)" \
    diff -r -x cri-nstarget "$work/install-local" "$t"
  check "$arch tarball: the binary is the release binary" cmp "$t/usr/local/bin/cri-nstarget" "$a/cri-nstarget-$version-linux-$arch"
  check "$arch tarball: owned by root, dated at the commit" bash -c \
    "out=\$(tar -tvzf '$a/cri-nstarget-$version-linux-$arch.tar.gz' --numeric-owner --full-time --utc | awk '\$2 != \"0/0\" || \$4\" \"\$5 != \"$(TZ=UTC git log -1 --format=%cd --date=format-local:'%Y-%m-%d %H:%M:%S' "$commit")\"'); [ -z \"\$out\" ] || { echo \"\$out\"; false; }"
  t=$work/suite-tar-$arch
  mkdir -p "$t" && tar -C "$t" -xzf "$a/nstarget-conformance-$version-linux-$arch.tar.gz"
  check "$arch suite tarball: make install-conformance's files and modes, owned by root" bash -c \
    "diff <(cd '$work/suite-local' && find . -type f -printf '%m %P\n' | LC_ALL=C sort) <(cd '$t' && find . -type f -printf '%m %P\n' | LC_ALL=C sort) &&
     [ -z \"\$(tar -tvzf '$a/nstarget-conformance-$version-linux-$arch.tar.gz' --numeric-owner | awk '\$2 != \"0/0\"')\" ]"
  check "$arch suite tarball: the same contents (the binary aside), the binary the release's" bash -c \
    "diff -r -x nstarget-conformance '$work/suite-local' '$t' && cmp '$t/usr/local/bin/nstarget-conformance' '$a/nstarget-conformance-$version-linux-$arch'"
done

# --- the packages: make install PREFIX=/usr's tree, plus each format's own files ---
# What make install PREFIX=/usr installs, as a package holds it: paths from
# /, the man page gzipped.
want=$(files "$work/install-usr" | sed -e 's| | /|' -e 's|/cri-nstarget\.8$|/cri-nstarget.8.gz|')
debian_own="0644 /usr/share/doc/cri-nstarget/changelog.Debian.gz
0644 /usr/share/doc/cri-nstarget/copyright
0644 /usr/share/lintian/overrides/cri-nstarget"
rpm_own="0644 /usr/share/doc/cri-nstarget/copyright"
for arch in amd64 arm64; do
  deb=$a/cri-nstarget_${debver}_$arch.deb
  rpmarch=$([ $arch = amd64 ] && echo x86_64 || echo aarch64)
  rpmf=$a/cri-nstarget-$rpmver.$rpmarch.rpm
  check "$arch .deb: make install PREFIX=/usr's files and modes, plus copyright, changelog, lintian overrides" \
    diff <(printf '%s\n%s\n' "$want" "$debian_own" | LC_ALL=C sort) \
    <(dpkg-deb -c "$deb" | awk '$1 ~ /^-/ {m=0; p=substr($1,2,9); for(i=1;i<=9;i++){m=m*2+(substr(p,i,1)!="-")}; printf "0%o %s\n", m, substr($6,2)}' | LC_ALL=C sort)
  check "$arch .deb: the config is its only conffile" diff <(echo /etc/cri-nstarget/config.toml) <(dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles)
  check "$arch .deb: Architecture $arch, no Depends or Recommends, Suggests: containerd | containerd.io" bash -c \
    "f=\$(dpkg-deb -f '$deb' Architecture Depends Pre-Depends Recommends Suggests); [ \"\$f\" = 'Architecture: $arch
Suggests: containerd | containerd.io' ] || { echo \"\$f\"; false; }"
  check "$arch .deb: lintian reports no error" bash -c \
    "out=\$(lintian --tag-display-limit 0 '$deb' 2>&1 | grep -v 'running with root privileges'); echo \"\$out\"; ! grep -q '^E:' <<<\"\$out\""
  sed -n 's/^W: /      lintian warning: /p' <<<"$out"
  check "$arch .rpm: make install PREFIX=/usr's files and modes, plus copyright" \
    diff <(printf '%s\n%s\n' "$want" "$rpm_own" | LC_ALL=C sort) \
    <(rpm -qp --qf '[%{FILEMODES:octal} %{FILENAMES}\n]' "$rpmf" 2>/dev/null | awk '$1 ~ /^100/ {printf "0%s %s\n", substr($1,4), $2}' | LC_ALL=C sort)
  check "$arch .rpm: the config is %config(noreplace)" bash -c \
    "[ \"\$(rpm -qp --qf '[%{FILEFLAGS:fflags} %{FILENAMES}\n]' '$rpmf' 2>/dev/null | grep '^[a-z]* /etc/cri-nstarget/config.toml$')\" = 'cn /etc/cri-nstarget/config.toml' ]"
  check "$arch .rpm: owns its directories (rpm -e removes them)" diff \
    <(printf '%s\n' /etc/cri-nstarget /usr/share/doc/cri-nstarget /usr/share/doc/cri-nstarget/examples /usr/share/doc/cri-nstarget/examples/kubelet.service.d) \
    <(rpm -qp --qf '[%{FILEMODES:octal} %{FILENAMES}\n]' "$rpmf" 2>/dev/null | awk '$1 ~ /^40/ {print $2}' | LC_ALL=C sort)
  check "$arch .rpm: arch $rpmarch, requires and recommends no containerd, suggests it, digests verify" bash -c \
    "[ \"\$(rpm -qp --qf '%{ARCH}' '$rpmf' 2>/dev/null)\" = $rpmarch ] && ! rpm -qp --requires --recommends '$rpmf' 2>/dev/null | grep containerd &&
     [ \"\$(rpm -qp --suggests '$rpmf' 2>/dev/null)\" = '(containerd or containerd.io)' ] && rpm -K --nosignature '$rpmf' >/dev/null"
done

# --- the TARGET suite's packages: make install-conformance PREFIX=/usr's tree -------
suite_want=$(files "$work/suite-usr" | sed -e 's| | /|' -e 's|/nstarget-conformance\.8$|/nstarget-conformance.8.gz|')
suite_debian_own="0644 /usr/share/doc/cri-nstarget-conformance/changelog.Debian.gz
0644 /usr/share/doc/cri-nstarget-conformance/copyright
0644 /usr/share/lintian/overrides/cri-nstarget-conformance"
for arch in amd64 arm64; do
  deb=$a/cri-nstarget-conformance_${debver}_$arch.deb
  rpmarch=$([ $arch = amd64 ] && echo x86_64 || echo aarch64)
  rpmf=$a/cri-nstarget-conformance-$rpmver.$rpmarch.rpm
  check "$arch suite .deb: make install-conformance PREFIX=/usr's files and modes, plus copyright, changelog, lintian overrides" \
    diff <(printf '%s\n%s\n' "$suite_want" "$suite_debian_own" | LC_ALL=C sort) \
    <(dpkg-deb -c "$deb" | awk '$1 ~ /^-/ {m=0; p=substr($1,2,9); for(i=1;i<=9;i++){m=m*2+(substr(p,i,1)!="-")}; printf "0%o %s\n", m, substr($6,2)}' | LC_ALL=C sort)
  check "$arch suite .deb: Architecture $arch, no Depends, no conffile, no maintainer script" bash -c \
    "[ \"\$(dpkg-deb -f '$deb' Architecture)\" = $arch ] && [ -z \"\$(dpkg-deb -f '$deb' Depends)\" ] && [ -z \"\$(dpkg-deb --ctrl-tarfile '$deb' | tar -t | grep -v -e '^./\$' -e '^./control\$' -e '^./md5sums\$')\" ]"
  check "$arch suite .deb: lintian reports no error" bash -c \
    "out=\$(lintian --tag-display-limit 0 '$deb' 2>&1 | grep -v 'running with root privileges'); echo \"\$out\"; ! grep -q '^E:' <<<\"\$out\""
  check "$arch suite .rpm: make install-conformance PREFIX=/usr's files and modes, plus copyright; owns its doc dir" bash -c \
    "diff <(printf '%s\n%s\n' \"\$0\" '0644 /usr/share/doc/cri-nstarget-conformance/copyright' | LC_ALL=C sort) \
      <(rpm -qp --qf '[%{FILEMODES:octal} %{FILENAMES}\n]' '$rpmf' 2>/dev/null | awk '\$1 ~ /^100/ {printf \"0%s %s\\n\", substr(\$1,4), \$2}' | LC_ALL=C sort) &&
     [ \"\$(rpm -qp --qf '[%{FILEMODES:octal} %{FILENAMES}\n]' '$rpmf' 2>/dev/null | awk '\$1 ~ /^40/ {print \$2}')\" = /usr/share/doc/cri-nstarget-conformance ]" "$suite_want"
  check "$arch suite .rpm: arch $rpmarch, requires nothing of a package, digests verify" bash -c \
    "[ \"\$(rpm -qp --qf '%{ARCH}' '$rpmf' 2>/dev/null)\" = $rpmarch ] && ! rpm -qpR '$rpmf' 2>/dev/null | grep -v -e '^rpmlib(' -e '^/bin/sh\$' && rpm -K --nosignature '$rpmf' >/dev/null"
done

# --- the cluster install: deploy/ and the Helm chart name the image's digest ---------
# The digest of the OCI index in the image's .oci.tar (what `skopeo copy --all`
# pushes), which make release wrote into both (nstarget-chart checks the rest:
# hack/chart).
digest=$(tar -xOf "$a/cri-nstarget-image-$version.oci.tar" index.json | grep -o 'sha256:[0-9a-f]\{64\}' | head -1) || true
check "the release's deploy/ names the image by its tag and its index's digest (${digest:-none found})" bash -c \
  "[ -n '$digest' ] && tar -xOzf '$a/cri-nstarget-deploy-$version.tar.gz' deploy/install/kustomization.yaml | grep -qx '  digest: $digest' &&
   tar -xOzf '$a/cri-nstarget-deploy-$version.tar.gz' deploy/install/kustomization.yaml | grep -qx '  newTag: $version'"
check "the release's Helm chart cri-nstarget-${version#v}.tgz names it, with appVersion $version" bash -c \
  "[ -n '$digest' ] && tar -xOzf '$a/cri-nstarget-${version#v}.tgz' cri-nstarget/values.yaml | grep -qx '  digest: \"$digest\"' &&
   tar -xOzf '$a/cri-nstarget-${version#v}.tgz' cri-nstarget/Chart.yaml | grep -qx 'appVersion: $version'"

# --- the words: CHANGELOG.md's entry in the notes and in every package --------------
"$work/nstarget-changelog" notes "$version" >"$work/notes.md"
check "RELEASE-NOTES.md opens with CHANGELOG.md's entry for $version, whole" \
  cmp "$work/notes.md" <(head -c "$(stat -c %s "$work/notes.md")" "$a/RELEASE-NOTES.md")
check "RELEASE-NOTES.md names files make release made" bash -c \
  "for f in cri-nstarget_${debver}_amd64.deb cri-nstarget-${rpmver}.x86_64.rpm cri-nstarget-$version-linux-amd64.tar.gz cri-nstarget-conformance_${debver}_amd64.deb nstarget-conformance-$version-linux-amd64.tar.gz; do
     grep -qF \"\$f\" '$a/RELEASE-NOTES.md' && test -f '$a'/\"\$f\" || { echo \"\$f\"; exit 1; }; done"
# Every release CHANGELOG.md lists, from the one built down (Debian's order).
releases=$("$work/nstarget-changelog" list | sed -n "/^$version\$/,\$p" |
  sed -e 's/^v//' -e 's/-/~/' -e 's/$/-1/' | tr '\n' ' ')
for pkg in cri-nstarget cri-nstarget-conformance; do
  dpkg-deb --fsys-tarfile "$a/${pkg}_${debver}_amd64.deb" | tar -xO "./usr/share/doc/$pkg/changelog.Debian.gz" | zcat >"$work/$pkg.changelog"
  check "$pkg .deb: changelog.Debian.gz parses (dpkg-parsechangelog, no warning): $pkg $debver first, then every older release" bash -c \
    "out=\$(dpkg-parsechangelog -l '$work/$pkg.changelog' --all --format rfc822 2>'$work/$pkg.parse-errors') &&
     ! [ -s '$work/$pkg.parse-errors' ] && [ \"\$(sed -n 's/^Source: //p' <<<\"\$out\" | sort -u)\" = $pkg ] &&
     [ \"\$(sed -n 's/^Version: //p' <<<\"\$out\" | tr '\\n' ' ')\" = '$releases' ] || { cat '$work/$pkg.parse-errors'; echo \"\$out\" | head -20; false; }"
  # The entry's first item, its first words as plain text, in the changelog's flowed text.
  first=$(grep -m1 '^- ' "$work/notes.md" | sed -e 's/^- //' -e 's/`//g' -e 's/\*\*//g' | cut -d' ' -f1-6)
  check "$pkg .deb: changelog.Debian.gz holds the entry's items (\"$first ...\")" bash -c \
    '[ -z "$0" ] || tr -s " \n" " " <"$1" | grep -qF -- "$0"' "$first" "$work/$pkg.changelog"
  check "$pkg .rpm: %changelog, $rpmver first, every older release" bash -c \
    "out=\$(rpm -qp --changelog '$a/$pkg-$rpmver.x86_64.rpm' 2>/dev/null) && [ \"\$(sed -n 's/^\\* .* - \\([^ ]*\\)\$/\\1/p' <<<\"\$out\" | tr '\\n' ' ')\" = '$releases' ] || { echo \"\$out\" | head -20; false; }"
done
check "make release refuses a version without an entry in CHANGELOG.md, and says so" bash -c \
  "out=\$('$MAKE' --no-print-directory -s release VERSION=v0.0.0-nochangelog.1 DIST='$work/refused' ALLOW_DIRTY=1 2>&1); rc=\$?
   [ \$rc != 0 ] && grep -q 'no entry for v0.0.0-nochangelog.1' <<<\"\$out\" && grep -q 'has no entry in CHANGELOG.md' <<<\"\$out\" && [ ! -e '$work/refused' ] || { echo \"exit \$rc\"; echo \"\$out\"; false; }"

# --- install, remove, purge; the image-baker recipes ------------------------------
# Each recipe is the block of docs/node-images.md after <!-- release-check: NAME -->.
snippet() { awk -v name="$1" '
  $0 == "<!-- release-check: " name " -->" { found = 1; next }
  found == 1 && /^```/ { found = 2; next }
  found == 2 && /^```/ { exit }
  found == 2 { print }' docs/node-images.md; }
snippet install-cri-nstarget.sh >"$work/install-cri-nstarget.sh"
snippet Dockerfile >"$work/Dockerfile"
check "docs/node-images.md has the Packer script and the kind Dockerfile" test -s "$work/install-cri-nstarget.sh" -a -s "$work/Dockerfile"
check "the Packer script is valid sh" sh -n "$work/install-cri-nstarget.sh"
# The Dockerfile's RUN steps, joined as the builder joins them (a line ending
# in \ goes on), with its ARGs' defaults and TARGETARCH; then its COPY
# sources must exist in dist/ under the names make release gives them.
{
  echo "set -eu"
  echo "TARGETARCH=amd64"
  sed -n 's/^ARG \([A-Z_]*\)=\(.*\)$/\1=\2/p' "$work/Dockerfile"
  awk '/^RUN / { run = 1; sub(/^RUN /, "") } run { print; if (!/\\$/) { run = 0; print "" } }' "$work/Dockerfile"
} >"$work/dockerfile-run.sh"
check "the Dockerfile's RUN steps are valid sh" sh -n "$work/dockerfile-run.sh"
copy_src=$(sed -n 's/^COPY \([^ ]*\) .*/\1/p' "$work/Dockerfile" | head -1)
copy_dst=$(sed -n 's/^COPY [^ ]* \(.*\)$/\1/p' "$work/Dockerfile" | head -1)
copy_file=$(eval "TARGETARCH=amd64; $(sed -n 's/^ARG \([A-Z_]*\)=\(.*\)$/\1=\2/p' "$work/Dockerfile" | sed "s/^VERSION=.*/VERSION=${debver%-1}/"); echo $copy_src")
check "the Dockerfile copies a package make release names so ($copy_file)" test -f "$a/$copy_file"
# BuildKit's Dockerfile parser and HCL's, from their own module (hack/snippets).
(cd hack/snippets && "$GO" build -o ../../bin/snippets-check .)
snippet packer.pkr.hcl >"$work/packer.pkr.hcl"
check "the Dockerfile parses (BuildKit's parser and instructions, no warning)" bin/snippets-check dockerfile "$work/Dockerfile"
check "the Packer template parses (HCL), with a file and a shell provisioner" bin/snippets-check packer "$work/packer.pkr.hcl"

host_state() { # what of cri-nstarget this machine has, and what /run holds
  dpkg-query -W -f '${Status} ${Version}\n' cri-nstarget 2>/dev/null || echo "no package"
  dpkg-query -W -f '${Status} ${Version}\n' cri-nstarget-conformance 2>/dev/null || echo "no suite package"
  ls -A /run | sed 's|^|/run/|'
  ls -d /etc/cri-nstarget /usr/bin/cri-nstarget /usr/bin/nstarget-conformance /usr/lib/systemd/system/cri-nstarget.service \
    /etc/systemd/system/*/cri-nstarget.service /etc/systemd/system/cri-nstarget.service \
    /etc/systemd/system/kubelet.service.d/20-cri-nstarget.conf /var/lib/systemd/deb-systemd-helper-enabled/cri-nstarget.service.dsh-also 2>/dev/null || true
}
host_state >"$work/host-before"
deb=$a/cri-nstarget_${debver}_amd64.deb
cp "$deb" "$work/cri-nstarget.deb"
cp "$a/cri-nstarget-$rpmver.x86_64.rpm" "$work/cri-nstarget.rpm"
cp "$a/cri-nstarget-conformance_${debver}_amd64.deb" "$work/cri-nstarget-conformance.deb"
printf '%s\n%s\n' "$want" "$rpm_own" | awk '{print $2}' | LC_ALL=C sort >"$work/expected-rpm"
expected_deb=$(printf '%s\n%s\n' "$want" "$debian_own" | awk '{print $2}' | LC_ALL=C sort)

# Runs inside the overlay, chrooted; prints "ok: ..." / "FAIL: ..." lines.
cat >"$work/in-overlay.sh" <<'EOF'
set -u
deb=/tmp/release-check/cri-nstarget.deb
ok() { echo "ok:   $*"; }
fail() { echo "FAIL: $*"; }
check() { local what=$1; shift; if out=$("$@" 2>&1); then ok "$what"; else fail "$what"; [ -z "$out" ] || sed 's/^/      /' <<<"$out" | head -30; fi; }
status() { dpkg-query -W -f '${db:Status-Abbrev}' cri-nstarget 2>/dev/null | tr -d ' '; }
links() { find /etc/systemd/system -name 'cri-nstarget.service' 2>/dev/null | LC_ALL=C sort; }
# A package already on this machine is purged here, in the overlay only.
if [ -n "$(status)" ] && [ "$(status)" != un ]; then
  echo "note: this machine has cri-nstarget installed ($(status)); purged inside the overlay only"
  dpkg -P cri-nstarget >/dev/null 2>&1
fi
export DEBIAN_FRONTEND=noninteractive
# A node whose containerd came from containerd's release tarball (its
# getting-started "option 1"): containerd in /usr/local/bin, its unit in
# /usr/local/lib/systemd/system, and no containerd package. Made here from
# this machine's Debian containerd, in the overlay only: its files moved,
# its dpkg record dropped (none of its maintainer scripts runs).
pkgstatus() { dpkg-query -W -f '${db:Status-Abbrev}' "$1" 2>/dev/null | tr -d ' '; }
export -f pkgstatus status
t0=$(date +%s%N)
if [ -n "$(pkgstatus containerd)" ]; then
  mkdir -p /usr/local/bin /usr/local/lib/systemd/system
  for f in $(dpkg-query -L containerd | grep '^/usr/bin/'); do mv "$f" /usr/local/bin/; done
  u=$(dpkg-query -L containerd | grep '/systemd/system/containerd.service$' | head -1)
  [ -z "$u" ] || { sed 's|/usr/bin/|/usr/local/bin/|g' "$u" >/usr/local/lib/systemd/system/containerd.service; rm -f "$u"; }
  awk 'BEGIN { RS = ""; ORS = "\n\n" } !/^Package: containerd\n/' /var/lib/dpkg/status >/var/lib/dpkg/status.new && mv /var/lib/dpkg/status.new /var/lib/dpkg/status
  rm -f /var/lib/dpkg/info/containerd.*
fi
check "the node's containerd is the tarball's: no containerd or containerd.io package" bash -c \
  '[ "$(pkgstatus containerd)" != ii ] && [ "$(pkgstatus containerd.io)" != ii ] && test -x /usr/local/bin/containerd'
check "apt-get install ./the.deb (README's line) installs it there, downloading nothing" bash -c \
  'apt-get install -y -o APT::Sandbox::User=root '"$deb"' >/tmp/release-check/install.log 2>&1 || { cat /tmp/release-check/install.log; false; }'
check "dpkg: installed, and still no containerd package (apt pulled in nothing)" bash -c \
  '[ "$(status)" = ii ] && [ "$(pkgstatus containerd)" != ii ] && ! grep -i "^Get:[0-9]* http\|^Unpacking containerd\|^Setting up containerd\|^Setting up runc" /tmp/release-check/install.log'
check "the postinst printed cri-nstarget check: containerd not answering, what to do; the install did not fail" bash -c \
  'grep -q "^cri-nstarget: pre-flight check (cri-nstarget check):" /tmp/release-check/install.log &&
   grep -q "^  fail: runtime_endpoint unix:///run/containerd/containerd.sock: .*no such file or directory.* — start containerd" /tmp/release-check/install.log &&
   grep -q "^cri-nstarget: installed, but the check above failed" /tmp/release-check/install.log || { cat /tmp/release-check/install.log; false; }'
sed 's/^/      postinst: /' /tmp/release-check/install.log | grep -e 'ok:' -e 'warn:' -e 'fail:' -e 'check above'
echo "timing: the tarball node made, and apt-get install, in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
check "dpkg: installed" test "$(status)" = ii
check "dpkg -L lists make install PREFIX=/usr's files (and Debian's)" \
  diff /tmp/release-check/expected-deb <(dpkg -L cri-nstarget | while read -r f; do [ -f "$f" ] && [ ! -L "$f" ] && echo "$f"; done | LC_ALL=C sort)
check "the installed binary runs" /usr/bin/cri-nstarget --version
check "the installed config is what the binary accepts" /usr/bin/cri-nstarget config check --config /etc/cri-nstarget/config.toml
check "the unit is not enabled (no links)" test -z "$(links)"
check "systemctl is-enabled: disabled" bash -c '[ "$(systemctl is-enabled cri-nstarget.service 2>&1)" = disabled ]'
# (A process started from here runs /usr/bin/cri-nstarget as seen from here;
# the host has none: its cri-nstarget processes, if any, run other paths.)
check "nothing was started (no /run/cri-nstarget, no process)" bash -c \
  '[ ! -e /run/cri-nstarget ] && ! for p in /proc/[0-9]*; do readlink "$p/exe" 2>/dev/null; done | grep -x /usr/bin/cri-nstarget'
echo 'log_level = "debug"' >>/etc/cri-nstarget/config.toml
t0=$(date +%s%N)
check "dpkg -i again (reinstall) keeps a changed config" bash -c \
  'dpkg -i --force-confold '"$deb"' >/dev/null && grep -qx "log_level = \"debug\"" /etc/cri-nstarget/config.toml'
echo "timing: dpkg -i (reinstall) in $(( ($(date +%s%N) - t0) / 1000000 )) ms"
check "dpkg -r removes the package" dpkg -r cri-nstarget
check "dpkg -r: config-files state, the conffile kept" bash -c '[ "$(dpkg-query -W -f "\${db:Status-Abbrev}" cri-nstarget | tr -d " ")" = rc ] && test -f /etc/cri-nstarget/config.toml'
check "dpkg -r: binary, unit, man page and docs gone" bash -c \
  '! ls /usr/bin/cri-nstarget /usr/lib/systemd/system/cri-nstarget.service /usr/share/man/man8/cri-nstarget.8.gz /usr/share/doc/cri-nstarget 2>/dev/null | grep .'
check "dpkg -P purges it" dpkg -P cri-nstarget
check "dpkg -P: no package" bash -c 's=$(dpkg-query -W -f "\${db:Status-Abbrev}" cri-nstarget 2>/dev/null | tr -d " "); [ -z "$s" ] || [ "$s" = un ] || [ "$s" = pn ] || { echo "status $s"; false; }'
check "dpkg -P: no /etc/cri-nstarget, no unit links or mask" bash -c \
  '! test -e /etc/cri-nstarget && [ -z "$(find /etc/systemd/system -name cri-nstarget.service)" ]'

# The TARGET suite's package: installs alone (it depends on nothing), runs, purges.
check "suite: dpkg -i installs cri-nstarget-conformance" dpkg -i /tmp/release-check/cri-nstarget-conformance.deb
check "suite: nstarget-conformance --version and --list run" bash -c '/usr/bin/nstarget-conformance --version && /usr/bin/nstarget-conformance --list >/dev/null'
check "suite: its man page and qualify.md are there" test -f /usr/share/man/man8/nstarget-conformance.8.gz -a -f /usr/share/doc/cri-nstarget-conformance/qualify.md
check "suite: dpkg -P purges it, nothing left" bash -c \
  'dpkg -P cri-nstarget-conformance >/dev/null && ! ls /usr/bin/nstarget-conformance /usr/share/doc/cri-nstarget-conformance /usr/share/man/man8/nstarget-conformance.8.gz 2>/dev/null | grep .'

# The Packer provisioner's script, as Packer runs it: uploaded .deb, root.
cp "$deb" /tmp/cri-nstarget.deb
check "the Packer script installs, drops in the kubelet flag, enables" sh -eu /tmp/release-check/install-cri-nstarget.sh
check "Packer: installed" test "$(status)" = ii
check "Packer: kubelet's drop-in names the shim's socket" \
  grep -q -- '--container-runtime-endpoint=unix:///run/cri-nstarget/cri.sock' /etc/systemd/system/kubelet.service.d/20-cri-nstarget.conf
check "Packer: enabled (multi-user.target and containerd.service want it)" diff \
  <(printf '%s\n' /etc/systemd/system/containerd.service.wants/cri-nstarget.service /etc/systemd/system/multi-user.target.wants/cri-nstarget.service) <(links)
check "Packer: nothing was started" test ! -e /run/cri-nstarget
check "Packer: dpkg -P purges it, enablement links included" bash -c 'dpkg -P cri-nstarget >/dev/null && [ -z "$(find /etc/systemd/system -name cri-nstarget.service)" ] && ! test -e /etc/cri-nstarget'
rm -f /etc/systemd/system/kubelet.service.d/20-cri-nstarget.conf /tmp/cri-nstarget.deb
rmdir /etc/systemd/system/kubelet.service.d 2>/dev/null || true

# The kind Dockerfile's RUN steps, on an image like kind's base (Debian slim:
# dpkg drops /usr/share/doc and man pages), after its COPY.
printf 'path-exclude /usr/share/doc/*\npath-include /usr/share/doc/*/copyright\npath-exclude /usr/share/man/*\n' >/etc/dpkg/dpkg.cfg.d/release-check-slim
cp "$deb" "$COPY_DST"
check "kind: the Dockerfile's RUN steps install, drop in, enable" bash -eu /tmp/release-check/dockerfile-run.sh
check "kind: installed, docs dropped as on a slim image" bash -c "[ \"\$(dpkg-query -W -f '\${db:Status-Abbrev}' cri-nstarget | tr -d ' ')\" = ii ] && test ! -e /usr/share/doc/cri-nstarget/README.md"
check "kind: the drop-in is in place" grep -q -- '--container-runtime-endpoint=unix:///run/cri-nstarget/cri.sock' /etc/systemd/system/kubelet.service.d/20-cri-nstarget.conf
check "kind: enabled" test -n "$(links)"
check "kind: dpkg -P purges it" bash -c 'dpkg -P cri-nstarget >/dev/null && [ -z "$(find /etc/systemd/system -name cri-nstarget.service)" ] && ! test -e /etc/cri-nstarget && ! test -e /usr/bin/cri-nstarget'
# The drop-in is the recipe's, not the package's: dpkg leaves it.
rm -f /etc/systemd/system/kubelet.service.d/20-cri-nstarget.conf /etc/dpkg/dpkg.cfg.d/release-check-slim
rmdir /etc/systemd/system/kubelet.service.d 2>/dev/null || true

# The .rpm, with this machine's rpm (its database is empty: --nodeps, as
# not even /bin/sh, which the scriptlets require, is an rpm package here): installs its files, enables nothing;
# rpm -e removes them, an unchanged config too, a changed one kept as .rpmsave.
rpmi() { rpm "$@" --nodeps --force-debian 2>&1 | grep -v -e 'should not be used directly' -e 'assuming you know'; }
rpmi -i /tmp/release-check/cri-nstarget.rpm
check "rpm -i: rpm -ql lists make install PREFIX=/usr's files (and the copyright)" \
  diff /tmp/release-check/expected-rpm <(rpm -ql cri-nstarget | while read -r f; do [ -f "$f" ] && echo "$f"; done | LC_ALL=C sort)
check "rpm -i: the unit is not enabled, nothing started" bash -c '[ -z "$(find /etc/systemd/system -name cri-nstarget.service)" ] && [ ! -e /run/cri-nstarget ]'
rpmi -e cri-nstarget
check "rpm -e: everything gone, the unchanged config too" bash -c '! rpm -q cri-nstarget >/dev/null && ! test -e /etc/cri-nstarget && ! test -e /usr/bin/cri-nstarget'
rpmi -i /tmp/release-check/cri-nstarget.rpm
echo 'log_level = "debug"' >>/etc/cri-nstarget/config.toml
rpmi -e cri-nstarget
check "rpm -e: a changed config kept as config.toml.rpmsave, the rest gone" bash -c \
  'grep -qx "log_level = \"debug\"" /etc/cri-nstarget/config.toml.rpmsave && ! test -e /usr/bin/cri-nstarget && ! test -e /usr/lib/systemd/system/cri-nstarget.service'
rm -rf /etc/cri-nstarget
EOF

# The overlay: / read-only below, writes to a tmpfs; /proc, /dev, /sys of the
# host (systemctl finds it is in a chroot and works offline); /run and /tmp
# empty. Everything goes when the mount namespace's last process exits.
cat >"$work/overlay.sh" <<'EOF'
set -eu
work=$1
# mount -n: a private mount namespace still writes to the host's /run, where
# util-linux would record the mounts (/run/mount/utab)
mount -n -t tmpfs tmpfs "$work/ov"
mkdir -p "$work/ov/upper" "$work/ov/work" "$work/ov/root"
mount -n -t overlay overlay -o "lowerdir=/,upperdir=$work/ov/upper,workdir=$work/ov/work" "$work/ov/root"
r=$work/ov/root
mount -n --rbind /proc "$r/proc"; mount -n --rbind /dev "$r/dev"; mount -n --rbind /sys "$r/sys"
mount -n -t tmpfs tmpfs "$r/run"; mount -n -t tmpfs tmpfs "$r/tmp"
mkdir -p "$r/tmp/release-check"
cp "$work/cri-nstarget.deb" "$work/cri-nstarget.rpm" "$work/cri-nstarget-conformance.deb" "$work/expected-rpm" "$work/install-cri-nstarget.sh" "$work/dockerfile-run.sh" "$work/in-overlay.sh" "$work/expected-deb" "$r/tmp/release-check/"
COPY_DST=$2 chroot "$r" /bin/bash /tmp/release-check/in-overlay.sh
# What the overlay holds of cri-nstarget after the purges: nothing but
# dpkg's and the recipes' logs.
echo "left: $(cd "$work/ov/upper" && find . -path ./var/lib/dpkg -prune -o -path ./var/log -prune -o -path ./var/cache -prune -o -path ./tmp -prune -o -path ./run -prune -o \( -name '*cri-nstarget*' -o -name '*nstarget-conformance*' \) -print | tr '\n' ' ')"
EOF
echo "$expected_deb" >"$work/expected-deb"
mkdir -p "$work/ov"
overlay_start=$SECONDS
unshare --mount --propagation private bash "$work/overlay.sh" "$work" "$copy_dst" >"$work/overlay.log" 2>&1 || true
echo "      the overlay's steps took $((SECONDS - overlay_start)) s"
while IFS= read -r line; do
  case $line in
    "ok:   "*) ok "overlay: ${line#ok:   }" ;;
    "FAIL: "*) fail "overlay: ${line#FAIL: }" ;;
    "left: "*) left=$(echo ${line#left: })
      if [ -z "$left" ]; then ok "overlay: after the purges nothing of cri-nstarget is left"
      else fail "overlay: after the purges nothing of cri-nstarget is left"; echo "      left: $left"; fi ;;
    *) echo "      $line" ;;
  esac
done <"$work/overlay.log"
check "the overlay ran every step" bash -c "grep -q '^left: ' '$work/overlay.log'"
host_state >"$work/host-after"
check "this machine is as it was (no package, no files, no unit links, nothing new in /run)" diff "$work/host-before" "$work/host-after"

echo "release-check: $passed passed, $failed failed"
[ "$failed" = 0 ]
