#!/usr/bin/env bash
# Fuzzes the client protocol's decoders (tests/fuzz/protocol_fuzz.cc) for a bounded time:
# builds the libFuzzer target with clang (AddressSanitizer + UndefinedBehaviorSanitizer), writes a
# seed corpus of valid messages, and runs the fuzzer for N seconds (default 60). Exits non-zero on
# any crash, sanitizer report or failed round trip; the crashing input is left in build/fuzz/.
#
#   tools/fuzz.sh [seconds]
#
# The decoders depend only on the standard library, abseil and fmt, so this builds them alone,
# outside CMake, linking Debian's (gcc-built, uninstrumented) abseil and fmt shared libraries; only
# our code is instrumented, which is what is being fuzzed. tools/check.sh runs it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-60}"
out=build/fuzz
mkdir -p "$out"
rm -rf "$out/corpus" && mkdir -p "$out/corpus"

cxx=(clang++)
command -v ccache >/dev/null && cxx=(ccache clang++)
srcs=(client/protocol/frame_codec.cc client/protocol/record_codec.cc
      client/protocol/record_results.cc client/protocol/region_layout.cc
      tests/fuzz/protocol_fuzz.cc)
flags=(-std=c++20 -O1 -g -I. -fno-omit-frame-pointer -Wall -Werror
       -fsanitize=address,undefined -fno-sanitize-recover=all)
read -r -a libs <<<"$(pkg-config --libs absl_statusor absl_status) -lfmt"

echo "== fuzz: building with $(clang++ --version | head -1) =="
"${cxx[@]}" "${flags[@]}" -fsanitize=fuzzer "${srcs[@]}" -o "$out/protocol_fuzz" "${libs[@]}" &
build_fuzzer=$!
"${cxx[@]}" "${flags[@]}" "${srcs[@]}" tests/fuzz/protocol_fuzz_seeds.cc \
  -o "$out/protocol_fuzz_seeds" "${libs[@]}"
wait "$build_fuzzer"

"$out/protocol_fuzz_seeds" "$out/corpus"
echo "== fuzz: running ${seconds}s =="
if "$out/protocol_fuzz" -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -artifact_prefix="$out/" -print_final_stats=1 "$out/corpus" >"$out/fuzz.log" 2>&1; then
  grep -E '^(Done|stat::)' "$out/fuzz.log" || true
  echo "== fuzz: no crash in ${seconds}s (log: $out/fuzz.log) =="
else
  tail -n 60 "$out/fuzz.log"
  echo "== fuzz: FAILED; the input is in $out/ (crash-*, timeout-*, oom-*) =="
  exit 1
fi
