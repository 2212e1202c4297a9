#!/usr/bin/env bash
# tools/demo.sh end to end on the CPU (ctest demo_script_test): the real script with --tiny (a
# 2-layer random-weight model, a short prompt) over the binaries of this build tree (--bin-dir,
# so nothing is built). It must exit 0, print both times to first token, say the second request
# came from kvtierd's T1, say plainly that the weights are random, and stop both processes.
# Usage: demo_test.sh BUILD_DIR
set -uo pipefail
BUILD_DIR=$1
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT
"$ROOT/tools/demo.sh" --tiny --device cpu --bin-dir "$BUILD_DIR" >"$OUT" 2>&1
rc=$?
cat "$OUT"
fail=0
expect() {  # expect REGEX WHAT
  if ! grep -Eq -- "$1" "$OUT"; then
    echo "FAIL: the output does not show $2 (/$1/)"
    fail=1
  fi
}
[[ $rc == 0 ]] || { echo "FAIL: tools/demo.sh exited $rc"; fail=1; }
expect '^request 1: TTFT +[0-9.]+ ms' "the first request's TTFT"
expect '^request 2: TTFT +[0-9.]+ ms' "the second request's TTFT"
expect '^second request served from: T1 ' "the tier of the second request"
expect 'RANDOM weights.*meaningless' "that the random model's text is meaningless"
expect 'CPU backend' "that the CPU backend runs"
expect '^== kvtier serve stopped' "kvtier serve stopping cleanly"
expect '^== kvtierd stopped' "kvtierd stopping cleanly"
exit $fail
