#!/usr/bin/env bash
# The trace served with and without kvtierd's tiers on one GPU host, both runs in one go
# (docs/benchmarks.md, "A trace served with and without the tiers"): a private GPU pool of 8 GiB,
# then a fresh kvtierd (T0 8 GiB, T1 32 GiB, T2 24 GiB) behind the same server, each replaying
# the same window of the Mooncake trace with `kvtier serve-bench`. Prints one line per run.
#
#   tools/gpu_trace_serve.sh BIN_DIR MODEL_DIR TRACE OUT_DIR [DURATION_S]
#
# BIN_DIR holds kvtier and kvtierd (a tools/gpu_bundle.sh folder: LD_LIBRARY_PATH is set to it);
# MODEL_DIR a model with its tokenizer.json (tests/engine/hf_8b_model.py writes the 8B shape; copy
# third_party/tokenizers/llama3_1/tokenizer*.json beside it); DURATION_S the scaled window
# (60: the first 240 s of the trace at --time-scale 0.25). Needs ~60 GiB of disk beside /tmp.
set -euo pipefail
bin=$1 model=$2 trace=$3 out=$4 duration=${5:-60}
export LD_LIBRARY_PATH="$bin:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
here="$(cd "$(dirname "$0")/.." && pwd)"
bench=(--trace "$trace" --sample-conversations 8 --duration "$duration" --time-scale 0.25
  --max-prompt-tokens 16384 --max-output-tokens 256 --max-in-flight 64 --read-timeout 300
  --progress 30 --json)
wait_http() {
  for _ in $(seq 240); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$1/health', timeout=2)" \
      2>/dev/null && return 0
    sleep 0.5
  done
  echo "gpu_trace_serve: no /health on port $1" >&2
  return 1
}
summary() {
  python3 - "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); m = r["metrics"]
print(sys.argv[1], "wall %.1f s" % r["wall_s"], "TTFT p50/p99 %.2f/%.2f s" % (r["ttft_s"]["p50"], r["ttft_s"]["p99"]),
      "out tok/s %.0f" % r["output_tokens_per_s"], "cached %d of %d" % (r["cached_tokens"], r["ideal_cached_tokens"]),
      "preemptions", m["series"].get("kvtier_serve_preemptions_total"), m["prompt_tokens_by_source"])
part = lambda p: m["series"].get('kvtier_serve_engine_seconds_total{part="%s"}' % p, 0)
steps = lambda k: m["series"].get('kvtier_serve_engine_steps_total{kind="%s"}' % k, 0)
print("  engine thread s: schedule %.1f forward %.1f update %.1f room_wait %.1f; steps ran %d waited %d"
      % (part("schedule"), part("forward"), part("update"), part("room_wait"), steps("ran"), steps("waited")))
PY
}
mkdir -p "$out"
"$bin/kvtier" serve --model "$model" --port 8000 --max-model-len 20480 --kv-blocks 4096 \
  >"$out/serve_gpu_only.log" 2>&1 &
serve=$!
wait_http 8000
"$bin/kvtier" serve-bench "${bench[@]}" --port 8000 >"$out/gpu_only.json" 2>"$out/bench_gpu_only.err"
kill "$serve"; wait "$serve" 2>/dev/null || true
kvd=$(mktemp -d /tmp/kvd.XXXXXX)
"$bin/kvtierd" --config "$here/configs/default.toml" --daemon.data_directory "$kvd" \
  --daemon.socket_path "$kvd/s" --t0.enabled true --t0.capacity_bytes 8GiB --t1.capacity_bytes 32GiB \
  --t1.slot_bytes 2MiB --t1.huge_pages off --t1.touch_threads 16 --t2.enabled true \
  --t2.capacity_bytes 24GiB --daemon.max_working_slots 4096 \
  --metrics.listen_address 127.0.0.1:9400 >"$out/kvtierd.log" 2>&1 &
daemon=$!
for _ in $(seq 120); do
  [ -S "$kvd/s" ] && break
  kill -0 "$daemon" 2>/dev/null || { tail -3 "$out/kvtierd.log" >&2; exit 1; }  # it refused to start
  sleep 0.5
done
"$bin/kvtier" serve --model "$model" --port 8001 --max-model-len 20480 --daemon "$kvd/s" \
  >"$out/serve_tiers.log" 2>&1 &
serve=$!
wait_http 8001
for _ in $(seq 40); do grep -q 'bytes usable' "$out/kvtierd.log" && break; sleep 0.5; done  # T1 ready
"$bin/kvtier" serve-bench "${bench[@]}" --port 8001 >"$out/tiers.json" 2>"$out/bench_tiers.err"
python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9400/metrics', timeout=5).read().decode())" \
  >"$out/kvtierd_metrics.txt"
kill "$serve" "$daemon"; wait 2>/dev/null || true
rm -rf "$kvd"
summary "$out/gpu_only.json"
summary "$out/tiers.json"
