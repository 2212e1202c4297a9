#!/usr/bin/env bash
# Checks formatting and the lock annotations of client/ and daemon/ (the tsa preset: clang's
# -Wthread-safety, compile only), builds kvtier and runs every test: the CPU-only optimised build,
# then the AddressSanitizer + UndefinedBehaviorSanitizer build, then the concurrent parts' tests
# under ThreadSanitizer (the `tsan` presets name which), then the CUDA and HIP variants: compiled
# and linked, their GPU tests run (they skip, saying why, on a machine without a GPU). This is the
# README's test command and what .ci/run runs.
set -euo pipefail
cd "$(dirname "$0")/.."
# The GPU variants compile most sources exactly as the CPU build does, in another build directory:
# without these, ccache hashes the directory (debug info names it) and compiles everything again.
export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
echo "== check: format =="
tools/format.sh --check
# tsa compiles only (its workflow has no test step): a lock taken wrongly fails here, in seconds
# once ccache holds the rest.
for preset in tsa default asan tsan; do
  echo "== check: $preset =="
  cmake --workflow --preset "$preset"
done
# The GPU variants: kvtier_gpu, kvtierd and the GPU tests and benchmarks (CMakePresets.json).
if [ -x /usr/local/cuda/bin/nvcc ]; then
  echo "== check: cuda =="
  cmake --workflow --preset cuda
else
  echo "== check: cuda SKIPPED: /usr/local/cuda/bin/nvcc not found (the CUDA toolkit is the machine's) =="
fi
echo "== check: hip =="
cmake --workflow --preset hip
tools/fuzz.sh 40  # the protocol decoders' libFuzzer target, bounded (~1 min with the build)
echo "== check: all presets passed =="
