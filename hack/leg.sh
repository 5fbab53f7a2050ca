#!/usr/bin/env bash
# Runs one leg of `make test` and prints how long it took; the line is also
# appended to $LEG_LOG (default bin/legs.txt), which .ci/run prints at the end.
#   hack/leg.sh NAME COMMAND [ARG...]
set -uo pipefail
name=$1
shift
log=${LEG_LOG:-bin/legs.txt}
start=$(date +%s)
"$@"
rc=$?
line=$(printf 'leg %-34s %4ds  exit %d' "$name" $(($(date +%s) - start)) "$rc")
echo "== $line"
mkdir -p "$(dirname "$log")" && echo "$line" >>"$log"
exit "$rc"
