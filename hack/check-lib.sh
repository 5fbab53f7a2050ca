# Sourced by hack/install-check.sh and hack/release-check.sh: counts of
# checks passed and failed, and check DESCRIPTION COMMAND... which runs the
# command and shows (the start of) its output when it fails.
passed=0 failed=0
ok() { passed=$((passed + 1)); echo "ok:   $*"; }
fail() { failed=$((failed + 1)); echo "FAIL: $*"; }
check() { # check DESCRIPTION COMMAND...
  local what=$1; shift
  if out=$("$@" 2>&1); then ok "$what"; else fail "$what"; [ -z "$out" ] || sed 's/^/      /' <<<"$out" | head -40; fi
}
