#!/usr/bin/env bash
# Checks formatting, builds kvtier and runs every test: the CPU-only optimised build, then the AddressSanitizer +
# UndefinedBehaviorSanitizer build, then the concurrent parts' tests under ThreadSanitizer (the
# `tsan` presets name which). GPU variants join here when the GPU issue lands. This is the
# README's test command and what .ci/run runs.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== check: format =="
tools/format.sh --check
for preset in default asan tsan; do
  echo "== check: $preset =="
  cmake --workflow --preset "$preset"
done
tools/fuzz.sh 40  # the protocol decoders' libFuzzer target, bounded (~1 min with the build)
echo "== check: all presets passed =="
