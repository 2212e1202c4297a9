#!/usr/bin/env bash
# A replay demo: builds `kvtier`, generates a seeded sample workload with `kvtier synth`
# and replays it with `kvtier replay`, printing each eviction policy's hit ratios side by side with
# Belady's optimum.
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset default >/dev/null
cmake --build --preset default --target kvtier
mkdir -p build/demo
kvtier=build/default/tools/kvtier
$kvtier synth --seed 42 --requests 20000 --out build/demo/synth.jsonl
echo "== sample workload build/demo/synth.jsonl, one cache tier of 2,000 blocks of 512 tokens =="
$kvtier replay --trace build/demo/synth.jsonl --capacity-blocks 2000 \
  --compare lru,fifo,sieve,s3fifo,arc,opt "$@"
