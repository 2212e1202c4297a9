#!/usr/bin/env bash
# The trace served with and without kvtierd's tiers on one GPU host, both runs in one go
# (docs/benchmarks.md, "A trace served with and without the tiers"): a private GPU pool of 8 GiB,
# then a fresh kvtierd (T0 8 GiB, T1 32 GiB, T2 24 GiB) behind the same server, each replaying
# the same window of the Mooncake trace with `kvtier serve-bench`. Prints one line per run.
#
#   tools/gpu_trace_serve.sh BIN_DIR MODEL_DIR TRACE OUT_DIR [DURATION_S [RUNS]]
#
# BIN_DIR holds kvtier and kvtierd (a tools/gpu_bundle.sh folder: LD_LIBRARY_PATH is set to it);
# MODEL_DIR a model with its tokenizer.json (tests/engine/hf_8b_model.py writes the 8B shape; copy
# third_party/tokenizers/llama3_1/tokenizer*.json beside it); DURATION_S the scaled window
# (60: the first 240 s of the trace at --time-scale 0.25); RUNS how many times the pair runs (the
# spread between runs on the same machine). Each run also writes its requests, one JSON line each
# (serve-bench --requests-out), and the last lines compare TTFT request by request: those the
# tiers served mostly from cache against the rest, in both runs. KVTIERD_FLAGS and SERVE_FLAGS
# (environment): more kvtierd and `kvtier serve` flags for the tiers' runs, e.g.
# KVTIERD_FLAGS="--t2.max_demotions_in_flight 16", SERVE_FLAGS="--lowest-prefix-tier t1" or
# "--room-patience-steps 0". VARIANTS (environment): instead of pairs, one private-pool run and
# then a kvtierd run for each ';'-separated set of `kvtier serve` flags, each compared with that
# one run (a device call's budget goes further), e.g.
#   VARIANTS=";--room-patience-steps 0;--lowest-prefix-tier t1" tools/gpu_trace_serve.sh ...
# (the first, empty, is the defaults). TIME_SCALE (environment, default 0.25): serve-bench's
# --time-scale, the load (0.5 with DURATION_S 120 replays the same 240 s of the trace at half the
# rate). Needs ~60 GiB of disk beside /tmp.
set -euo pipefail
bin=$1 model=$2 trace=$3 out=$4 duration=${5:-60} runs=${6:-1}
export LD_LIBRARY_PATH="$bin:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}"
here="$(cd "$(dirname "$0")/.." && pwd)"
bench=(--trace "$trace" --sample-conversations 8 --duration "$duration" --time-scale "${TIME_SCALE:-0.25}"
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
t = r["ttft_s"]
print(sys.argv[1], "wall %.1f s" % r["wall_s"], "TTFT p50/p90/p99 %.2f/%.2f/%.2f s, mean %.2f s" % (t["p50"], t["p90"], t["p99"], t["mean"]),
      "out tok/s %.0f" % r["output_tokens_per_s"], "cached %d of %d" % (r["cached_tokens"], r["ideal_cached_tokens"]),
      "preemptions", m["series"].get("kvtier_serve_preemptions_total"), m["prompt_tokens_by_source"])
part = lambda p: m["series"].get('kvtier_serve_engine_seconds_total{part="%s"}' % p, 0)
steps = lambda k: m["series"].get('kvtier_serve_engine_steps_total{kind="%s"}' % k, 0)
print("  engine thread s: schedule %.1f forward %.1f update %.1f room_wait %.1f; steps ran %d waited %d"
      % (part("schedule"), part("forward"), part("update"), part("room_wait"), steps("ran"), steps("waited")))
held = lambda r: m["series"].get('kvtier_serve_admission_held_steps_total{reason="%s"}' % r, 0)
print("  steps the first waiting request was held: " + ", ".join(
      "%s %d" % (r, held(r)) for r in ("running_wait", "limit", "prefix_loading", "prefix_room", "room")))
PY
}
# TTFT request by request in one pair of runs: the requests the tiers served mostly (>= half the
# prompt) from cache (split by whether any of it came from T2 or T3: usage's kvtier_cached_from),
# and the rest, each group's TTFT p50 in both runs (same requests, same order).
by_request() {
  python3 - "$1" "$2" <<'PY'
import json, sys
load = lambda p: [json.loads(l) for l in open(p)]
gpu, tiers = load(sys.argv[1]), load(sys.argv[2])
def p50(xs):
    xs = sorted(x for x in xs if x is not None)
    return xs[(len(xs) - 1) // 2] if xs else float("nan")
mostly = lambda t: 2 * t["cached_tokens"] >= t["prompt_tokens"]
t2 = lambda t: t.get("cached_from", {}).get("t2", 0) + t.get("cached_from", {}).get("t3", 0) > 0
for name, keep in (("mostly cached", mostly),
                   ("  none from T2", lambda t: mostly(t) and not t2(t)),
                   ("  some from T2", lambda t: mostly(t) and t2(t)),
                   ("the rest", lambda t: not mostly(t))):
    idx = [i for i, t in enumerate(tiers) if keep(t)]
    print("  %-13s by the tiers: %2d requests, TTFT p50 GPU-only %.2f s, tiers %.2f s; cached GPU-only %d, tiers %d"
          % (name, len(idx), p50(gpu[i]["ttft_s"] for i in idx), p50(tiers[i]["ttft_s"] for i in idx),
             sum(gpu[i]["cached_tokens"] for i in idx), sum(tiers[i]["cached_tokens"] for i in idx)))
# The slowest first tokens with the tiers, each beside the same request on the private pool:
# what it found where, and how often each run preempted it (usage.kvtier_preemptions).
pre = lambda t: t.get("preemptions") if t.get("preemptions") is not None else "?"
slow = sorted(range(len(tiers)), key=lambda i: -(tiers[i]["ttft_s"] or 0))[:5]
for i in slow:
    t, g = tiers[i], gpu[i]
    src = " ".join("%s %d" % (k, v) for k, v in t.get("cached_from", {}).items() if v)
    print("  slow #%d at %.2f s, %d prompt tokens: TTFT GPU-only %.2f s (preempted %s), tiers %.2f s (preempted %s, cached %s)"
          % (i, t["at_s"], t["prompt_tokens"], g["ttft_s"] or -1, pre(g), t["ttft_s"] or -1, pre(t), src or "none"))
PY
}
# The private pool's run, files suffixed with $1.
gpu_only() {
  local n=$1
  "$bin/kvtier" serve --model "$model" --port 8000 --max-model-len 20480 --kv-blocks 4096 \
    >"$out/serve_gpu_only$n.log" 2>&1 &
  local serve=$!
  wait_http 8000
  "$bin/kvtier" serve-bench "${bench[@]}" --port 8000 --requests-out "$out/gpu_only$n.jsonl" \
    >"$out/gpu_only$n.json" 2>"$out/bench_gpu_only$n.err"
  kill "$serve"; wait "$serve" 2>/dev/null || true
}
# A fresh kvtierd's run, files suffixed with $1; $2: more `kvtier serve` flags.
tiers() {
  local n=$1 serve_flags=$2 kvd
  kvd=$(mktemp -d /tmp/kvd.XXXXXX)
  "$bin/kvtierd" --config "$here/configs/default.toml" --daemon.data_directory "$kvd" \
    --daemon.socket_path "$kvd/s" --t0.enabled true --t0.capacity_bytes 8GiB --t1.capacity_bytes 32GiB \
    --t1.slot_bytes 2MiB --t1.huge_pages off --t1.touch_threads 16 --t2.enabled true \
    --t2.capacity_bytes 24GiB --daemon.max_working_slots 4096 \
    --metrics.listen_address 127.0.0.1:9400 ${KVTIERD_FLAGS:-} >"$out/kvtierd$n.log" 2>&1 &
  local daemon=$!
  for _ in $(seq 120); do
    [ -S "$kvd/s" ] && break
    kill -0 "$daemon" 2>/dev/null || { tail -3 "$out/kvtierd$n.log" >&2; exit 1; }  # it refused to start
    sleep 0.5
  done
  "$bin/kvtier" serve --model "$model" --port 8001 --max-model-len 20480 --daemon "$kvd/s" $serve_flags \
    >"$out/serve_tiers$n.log" 2>&1 &
  local serve=$!
  wait_http 8001
  for _ in $(seq 40); do grep -q 'bytes usable' "$out/kvtierd$n.log" && break; sleep 0.5; done  # T1 ready
  "$bin/kvtier" serve-bench "${bench[@]}" --port 8001 --requests-out "$out/tiers$n.jsonl" \
    >"$out/tiers$n.json" 2>"$out/bench_tiers$n.err"
  python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:9400/metrics', timeout=5).read().decode())" \
    >"$out/kvtierd_metrics$n.txt"
  kill "$serve" "$daemon"; wait 2>/dev/null || true
  rm -rf "$kvd"
}
mkdir -p "$out"
if [ -n "${VARIANTS:-}" ]; then
  # One private-pool run, then one kvtierd run per variant, each compared with it.
  IFS=';' read -r -a variants <<<"$VARIANTS"
  gpu_only 0
  for i in "${!variants[@]}"; do tiers "v$i" "${variants[$i]}"; done
  summary "$out/gpu_only0.json"
  for i in "${!variants[@]}"; do
    echo "variant $i: kvtier serve ${variants[$i]:-(defaults)}"
    summary "$out/tiersv$i.json"
    by_request "$out/gpu_only0.jsonl" "$out/tiersv$i.jsonl"
  done
  exit 0
fi
for n in $(seq "$runs"); do
  gpu_only "$n"
  tiers "$n" "${SERVE_FLAGS:-}"
done
for n in $(seq "$runs"); do
  summary "$out/gpu_only$n.json"
  summary "$out/tiers$n.json"
  by_request "$out/gpu_only$n.jsonl" "$out/tiers$n.jsonl"
done
