#!/usr/bin/env bash
# make install-check: `make install` into temporary DESTDIRs, as an image
# baker would (no systemctl, nothing started), then checks what landed:
#   - exactly the expected files, with their modes, and no unfilled @VAR@;
#   - the unit's ExecStart names the installed binary and config, for the
#     default PREFIX and for PREFIX=/usr;
#   - the installed binary runs and accepts the installed config, which is
#     what `cri-nstarget config default` prints;
#   - `systemd-analyze verify` accepts the installed unit and the kubelet
#     drop-in (skipped, with the reason, where systemd-analyze is missing,
#     except under CI, where hack/deps.sh installs it);
#   - the man page renders without groff warnings (where groff is present);
#   - reinstalling keeps a changed /etc config; uninstall removes every file,
#     but keeps an /etc config that was changed.
# Needs no root. Prints "N passed, N failed" and exits non-zero on a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
MAKE=${MAKE:-make}
work=$(mktemp -d /tmp/nst-install.XXXXXX)
trap 'rm -rf "$work"' EXIT
# shellcheck source=hack/check-lib.sh
. hack/check-lib.sh
quiet_make() { "$MAKE" --no-print-directory -s "$@" >"$work/make.log" 2>&1 || { cat "$work/make.log"; return 1; }; }

# --- install, default PREFIX (/usr/local) ---------------------------------
d=$work/root
quiet_make install DESTDIR="$d"
expected="0644 etc/cri-nstarget/config.toml
0644 usr/local/lib/systemd/system/cri-nstarget.service
0644 usr/local/share/doc/cri-nstarget/LICENSE
0644 usr/local/share/doc/cri-nstarget/README.md
0644 usr/local/share/doc/cri-nstarget/examples/config.toml
0644 usr/local/share/doc/cri-nstarget/examples/kubelet.service.d/20-cri-nstarget.conf
0644 usr/local/share/doc/cri-nstarget/operations.md
0644 usr/local/share/man/man8/cri-nstarget.8
0755 usr/local/bin/cri-nstarget"
files() { (cd "$1" && find . -type f -printf '%m %P\n' | sed 's/^\([0-7][0-7][0-7]\) /0\1 /' | sort); }
check "installs exactly the expected files, with their modes" diff <(echo "$expected" | sort) <(files "$d")

unit=$d/usr/local/lib/systemd/system/cri-nstarget.service
dropin=$d/usr/local/share/doc/cri-nstarget/examples/kubelet.service.d/20-cri-nstarget.conf
check "no @VAR@ left unfilled" bash -c "! grep -n '@[A-Z]*@' '$unit' '$dropin'"
check "ExecStart runs the installed binary with the installed config" \
  grep -qx 'ExecStart=/usr/local/bin/cri-nstarget --config /etc/cri-nstarget/config.toml' "$unit"
check "the drop-in's example path is the installed one" grep -q '/usr/local/share/doc/cri-nstarget/examples/' "$dropin"
check "the installed binary runs" "$d/usr/local/bin/cri-nstarget" --version
check "the installed config is what 'config default' prints" \
  cmp <("$d/usr/local/bin/cri-nstarget" config default) "$d/etc/cri-nstarget/config.toml"
check "the installed binary accepts the installed config" \
  "$d/usr/local/bin/cri-nstarget" config check --config "$d/etc/cri-nstarget/config.toml"

# --- systemd-analyze verify -------------------------------------------------
# verify resolves ExecStart on this machine, and units (Requires=, drop-ins)
# in its search path plus the directory of the file it is given. So it runs on
# copies, in one directory, whose ExecStart points into the DESTDIR; beside
# them, stand-ins for containerd.service (Requires=) and kubelet.service (the
# drop-in's unit), so the check does not depend on what this machine runs.
if command -v systemd-analyze >/dev/null 2>&1; then
  v=$work/verify
  mkdir -p "$v/kubelet.service.d"
  sed "s|^ExecStart=/usr/local/bin/|ExecStart=$d/usr/local/bin/|" "$unit" >"$v/cri-nstarget.service"
  printf '[Unit]\nDescription=stand-in\n[Service]\nExecStart=/bin/true\n' >"$v/containerd.service"
  printf '[Unit]\nDescription=stand-in\n[Service]\nExecStart=/bin/true\n' >"$v/kubelet.service"
  sed 's|^ExecStart=/usr/bin/kubelet |ExecStart=/bin/true |' "$dropin" >"$v/kubelet.service.d/20-cri-nstarget.conf"
  # verify exits 0 on an unknown or unparsable setting, with a warning: a
  # clean verify is exit 0 and no output. --man=no: the man page is in the
  # DESTDIR, not where man looks.
  verify() { out=$(systemd-analyze verify --man=no "$1" 2>&1) && [ -z "$out" ] || { echo "$out"; return 1; }; }
  refuses() { ! verify "$1" >/dev/null; }
  check "systemd-analyze verify: the installed unit" verify "$v/cri-nstarget.service"
  check "systemd-analyze verify: kubelet with the drop-in" verify "$v/kubelet.service"
  echo "info: $(systemd-analyze security --offline=yes "$v/cri-nstarget.service" 2>/dev/null | grep 'Overall exposure' | sed 's/^→ //')"
  sed 's|^NoNewPrivileges=|NoNewPrivilegez=|' "$v/cri-nstarget.service" >"$v/typo.service"
  check "verify catches a misspelt setting (the check can fail)" refuses "$v/typo.service"
  sed -i 's|^ExecStart=.*|ExecStart=/nonexistent/cri-nstarget|' "$v/cri-nstarget.service"
  check "verify catches a unit whose binary is missing (the check can fail)" refuses "$v/cri-nstarget.service"
elif [ "${CI:-}" = true ]; then
  fail "systemd-analyze is missing under CI (hack/deps.sh installs the Debian package systemd)"
else
  echo "skip: systemd-analyze verify: systemd-analyze is not installed (apt-get install systemd, or run make deps)"
fi

if command -v groff >/dev/null 2>&1; then
  check "man page renders without warnings" bash -c "out=\$(groff -man -ww -z docs/cri-nstarget.8 2>&1) && [ -z \"\$out\" ] || { echo \"\$out\"; false; }"
else
  echo "skip: man page lint: groff is not installed"
fi

# --- reinstall keeps a changed config; uninstall -----------------------------
echo 'log_level = "debug"' >"$d/etc/cri-nstarget/config.toml"
quiet_make install DESTDIR="$d"
check "reinstall keeps a changed /etc config" grep -qx 'log_level = "debug"' "$d/etc/cri-nstarget/config.toml"
quiet_make uninstall DESTDIR="$d"
check "uninstall keeps a changed /etc config, and nothing else" \
  diff <(echo "0644 etc/cri-nstarget/config.toml") <(files "$d")
rm "$d/etc/cri-nstarget/config.toml"
quiet_make install DESTDIR="$d"
quiet_make uninstall DESTDIR="$d"
check "uninstall leaves no file" diff /dev/null <(files "$d")
check "uninstall leaves none of its directories" \
  bash -c "! find '$d' -path '*cri-nstarget*' | grep ."

# --- PREFIX=/usr -----------------------------------------------------------
u=$work/usr
quiet_make install DESTDIR="$u" PREFIX=/usr
check "PREFIX=/usr: unit in /usr/lib/systemd/system, ExecStart=/usr/bin/cri-nstarget" \
  grep -qx 'ExecStart=/usr/bin/cri-nstarget --config /etc/cri-nstarget/config.toml' "$u/usr/lib/systemd/system/cri-nstarget.service"
check "PREFIX=/usr: binary in /usr/bin" test -x "$u/usr/bin/cri-nstarget"
quiet_make uninstall DESTDIR="$u" PREFIX=/usr
check "PREFIX=/usr: uninstall leaves no file" diff /dev/null <(files "$u")

echo "install-check: $passed passed, $failed failed"
[ "$failed" = 0 ]
