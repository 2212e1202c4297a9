#!/usr/bin/env bash
# Packs the remote tier's two benchmarks (docs/benchmarks.md "Remote tier (Redis protocol)" and
# "Remote tier: a prefix hit through kvtierd") into one folder for a host that has none of
# kvtier's Debian packages (a GPU host): kvtier_remote_store_bench, kvtier_remote_prefix_bench,
# kvtierd, redis-server, redis-benchmark and redis-cli with the libraries ldd lists
# (tools/gpu_bundle.sh, debug info stripped), kvtierd's base config, and run.sh, which runs both
# benches with the documented commands. On that host:
#
#   OUT_DIR/run.sh [REPEAT]          # from any directory; REPEAT defaults to 5
#
# The benches find redis-server, redis-benchmark and redis-cli on PATH and kvtierd through
# KVTIER_DAEMON / KVTIER_DAEMON_CONFIG (tests/daemon/kvtierd_process.h); run.sh sets all of them.
#
#   tools/remote_bench_bundle.sh OUT_DIR     BUILD=build/default by default: its three targets
#                                            are built first (cmake --build, nice)
set -euo pipefail
out=${1:?usage: tools/remote_bench_bundle.sh OUT_DIR}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD:-$root/build/default}
nice -n 15 cmake --build "$build" --target kvtier_remote_store_bench kvtier_remote_prefix_bench \
  kvtierd >/dev/null
rm -rf "$out"
"$root/tools/gpu_bundle.sh" "$out" "$build/tests/bench/kvtier_remote_store_bench" \
  "$build/tests/bench/kvtier_remote_prefix_bench" "$build/daemon/kvtierd" \
  "$(command -v redis-server)" "$(command -v redis-benchmark)" "$(command -v redis-cli)"
# Binaries only: gpu_bundle strips debug info, this strips the symbol tables too (the size cap).
strip "$out"/kvtier_* "$out"/kvtierd "$out"/redis-* 2>/dev/null || true
cp "$root/configs/default.toml" "$out/kvtierd.toml"
cat >"$out/run.sh" <<'EOF'
#!/usr/bin/env bash
# The remote tier's benchmarks from this bundle (tools/remote_bench_bundle.sh). Prints the host,
# its load, and each bench's lines; docs/benchmarks.md's remote sections say how to read them.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export PATH="$here:$PATH" LD_LIBRARY_PATH="$here${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export KVTIER_DAEMON="$here/kvtierd" KVTIER_DAEMON_CONFIG="$here/kvtierd.toml"
repeat=${1:-5}
echo "host: $(nproc) cores, $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
kvtier_remote_store_bench --repeat "$repeat"
kvtier_remote_store_bench --repeat "$repeat" --pipeline 16 --clients 2
kvtier_remote_prefix_bench --repeat "$repeat"
kvtier_remote_prefix_bench --repeat "$repeat" --blocks 64
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
EOF
chmod +x "$out/run.sh"
echo "remote_bench_bundle: $(du -sh "$out" | cut -f1) in $out; run there: $out/run.sh"
