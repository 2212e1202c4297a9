#!/usr/bin/env bash
# The quick start's demo: the bundled engine serving over kvtierd, and what a prefix hit buys.
#
#   1. builds kvtier and kvtierd (the cuda preset when nvidia-smi sees a GPU and nvcc exists, else
#      the default CPU-only preset);
#   2. takes --model DIR, or makes a model with random weights at Qwen3's architecture with the
#      real Qwen3 tokenizer (`kvtier make-model`; its text is meaningless);
#   3. starts kvtierd (configs/demo.toml, its T1 slots sized to one KV block of the engine) and
#      `kvtier serve --daemon` on it, in a temporary directory;
#   4. sends a short warm-up request, then the same long prompt twice (tools/demo_client.py,
#      Python's standard library), and prints both times to first token and the tier the
#      second request's prompt came from (kvtier_serve_prompt_tokens_total{source=...});
#   5. stops the server and kvtierd (SIGTERM; also on Ctrl-C or an error) and removes the
#      temporary directory.
#
# Flags (all optional):
#   --model DIR         a Hugging Face model directory (Llama 3.x, Qwen2/2.5, Qwen3, Mistral)
#   --device D          auto (default: the GPU when there is one), cpu or gpu; passed to serve
#   --prompt-words N    length of the prompt in words (default 600 on the CPU, 4000 on a GPU)
#   --max-tokens N      tokens generated per request (default 16)
#   --tiny              a 2-layer model and a short prompt (the CI test; seconds, not minutes)
#   --bin-dir DIR       use kvtier and kvtierd already built in DIR (DIR/tools/kvtier,
#                       DIR/daemon/kvtierd); nothing is built
#   --serve             after the demo, keep both running until Ctrl-C (point a client at it)
# The old demo, kvtierd alone in the foreground with configs/default.toml, is tools/kvtierd.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

MODEL="" DEVICE=auto WORDS="" MAX_TOKENS=16 TINY=0 BIN_DIR="" KEEP_SERVING=0
usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) MODEL=$2; shift 2 ;;
    --device) DEVICE=$2; shift 2 ;;
    --prompt-words) WORDS=$2; shift 2 ;;
    --max-tokens) MAX_TOKENS=$2; shift 2 ;;
    --tiny) TINY=1; shift ;;
    --bin-dir) BIN_DIR=$2; shift 2 ;;
    --serve) KEEP_SERVING=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) echo "demo.sh: unknown argument '$1' (--help lists them)" >&2; exit 2 ;;
  esac
done
case "$DEVICE" in auto | cpu | gpu) ;; *) echo "demo.sh: --device $DEVICE: auto, cpu or gpu" >&2; exit 2 ;; esac
say() { printf '== %s\n' "$*"; }

# ---- What this machine has. ----
HAVE_GPU=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then
  HAVE_GPU=1
fi
HAVE_NVCC=0
if command -v nvcc >/dev/null 2>&1 || [[ -x /usr/local/cuda/bin/nvcc ]]; then HAVE_NVCC=1; fi

# ---- 1. Build. ----
if [[ -z "$BIN_DIR" ]]; then
  PRESET=default
  if [[ $HAVE_GPU == 1 && $HAVE_NVCC == 1 && $DEVICE != cpu ]]; then PRESET=cuda; fi
  say "building kvtier and kvtierd (cmake preset $PRESET)"
  cmake --preset "$PRESET" >/dev/null
  cmake --build --preset "$PRESET" --target kvtier kvtierd
  BIN_DIR=build/$PRESET
fi
BIN_DIR=$(cd "$BIN_DIR" && pwd)
KVTIER=$BIN_DIR/tools/kvtier
KVTIERD=$BIN_DIR/daemon/kvtierd
for b in "$KVTIER" "$KVTIERD"; do
  [[ -x "$b" ]] || { echo "demo.sh: $b is missing (build it, or drop --bin-dir)" >&2; exit 1; }
done
# The GPU backend exists in a CUDA build only.
GPU_BUILD=0
if grep -qs '^KVTIER_CUDA:BOOL=ON' "$BIN_DIR/CMakeCache.txt"; then GPU_BUILD=1; fi
if [[ $DEVICE == gpu && ($HAVE_GPU == 0 || $GPU_BUILD == 0) ]]; then
  echo "demo.sh: --device gpu: $([[ $HAVE_GPU == 0 ]] && echo "nvidia-smi sees no GPU" ||
    echo "$BIN_DIR is a CPU-only build") (--device auto runs the CPU backend instead)" >&2
  exit 1
fi
ON_GPU=0
if [[ $DEVICE == gpu || ($DEVICE == auto && $HAVE_GPU == 1 && $GPU_BUILD == 1) ]]; then ON_GPU=1; fi
if [[ $ON_GPU == 0 ]]; then
  if [[ $DEVICE == cpu ]]; then
    say "--device cpu: the CPU backend runs the model (fp32), its KV cache in kvtierd's T1"
  elif [[ $HAVE_GPU == 0 ]]; then
    say "no GPU on this machine: the CPU backend runs the model (fp32), its KV cache in kvtierd's T1"
  else
    say "a GPU is here but $BIN_DIR is a CPU-only build: the CPU backend runs the model (fp32)"
  fi
fi

# ---- 2. The model (and the prompt's length): sized for the device. ----
GIVEN_MODEL=$MODEL GIVEN_WORDS=$WORDS RANDOM_MODEL=0
choose_model() {
  MODEL=$GIVEN_MODEL WORDS=$GIVEN_WORDS
  if [[ -z "$WORDS" ]]; then
    if [[ $TINY == 1 ]]; then WORDS=120; elif [[ $ON_GPU == 1 ]]; then WORDS=4000; else WORDS=600; fi
  fi
  if [[ -n "$MODEL" ]]; then
    [[ -f $MODEL/config.json ]] || { echo "demo.sh: --model $MODEL: no config.json there" >&2; exit 1; }
    return 0
  fi
  local tokenizer=$ROOT/third_party/tokenizers/qwen3 size args
  [[ -f $tokenizer/tokenizer.json ]] || { echo "demo.sh: $tokenizer is missing: run tools/setup.sh" >&2; exit 1; }
  if [[ $TINY == 1 ]]; then
    size=tiny args=(--layers 2 --hidden 64 --heads 4 --kv-heads 2 --max-position 4096)
  elif [[ $ON_GPU == 1 ]]; then  # Qwen3-0.6B's shape
    size=qwen3-0.6b args=(--layers 28 --hidden 1024 --heads 16 --kv-heads 8 --head-dim 128
      --intermediate 3072 --max-position 40960)
  else  # small enough for fp32 on a few CPU cores, large enough that prefill takes a while
    size=cpu args=(--layers 4 --hidden 256 --heads 4 --kv-heads 2 --max-position 8192)
  fi
  MODEL=$BIN_DIR/demo-model-$size
  if [[ ! -f $MODEL/model.safetensors ]]; then
    say "making a random-weight Qwen3-architecture model in $MODEL"
    rm -rf "$MODEL.tmp"
    "$KVTIER" make-model --out "$MODEL.tmp" --tokenizer "$tokenizer" --arch qwen3 "${args[@]}" \
      >"$BIN_DIR/demo-model.log" 2>&1 || { cat "$BIN_DIR/demo-model.log" >&2; exit 1; }
    mv "$MODEL.tmp" "$MODEL"
    grep -m1 'wrote' "$BIN_DIR/demo-model.log" | sed "s|$MODEL.tmp|$MODEL|; s|^kvtier make-model: |   |"
  fi
  if [[ $RANDOM_MODEL == 1 ]]; then return 0; fi  # said already
  say "the model has RANDOM weights (no download here): its text is meaningless; the timings and"
  say "the cache are real. Give --model DIR (a Hugging Face directory) for real text."
  RANDOM_MODEL=1
}
choose_model

# One KV block of the engine in bytes: block_tokens x layers x 2 (K, V) x kv_heads x head_dim x
# the element size (fp32 on the CPU, bf16/fp16 on the GPU).
block_bytes() {
  python3 - "$MODEL/config.json" "$1" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c = c.get("text_config", c)
heads = c["num_attention_heads"]
kv = c.get("num_key_value_heads") or heads
hd = c.get("head_dim") or c["hidden_size"] // heads
print(16 * c["num_hidden_layers"] * 2 * kv * hd * int(sys.argv[2]))
PY
}

# ---- 3. kvtierd and kvtier serve, stopped on any exit. ----
DATA=$(mktemp -d "${TMPDIR:-/tmp}/kvtier-demo.XXXXXX")
SOCKET=$DATA/kvtierd.sock
DAEMON_PID="" SERVE_PID="" INTERRUPTED=0
said_stopped() {  # said_stopped NAME STATUS
  if [[ $2 == 0 ]]; then say "$1 stopped"; else say "$1 exited with status $2"; fi
}
stop() {  # stop PID NAME: SIGTERM, wait, say how it ended
  local pid=$1 name=$2 rc=0
  [[ -n "$pid" ]] || return 0
  if [[ $INTERRUPTED == 1 ]]; then
    # Ctrl-C reached the whole process group: give it a moment to stop on that one signal (a
    # second one stops kvtier serve at once, without draining).
    for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  fi
  kill -TERM "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || rc=$?
  said_stopped "$name" "$rc"
}
cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  stop "$SERVE_PID" "kvtier serve"
  stop "$DAEMON_PID" kvtierd
  rm -rf "$DATA"
  exit "$rc"
}
trap cleanup EXIT
trap 'INTERRUPTED=1; exit 130' INT
trap 'exit 143' TERM

# wait_for FILE PATTERN PID WHAT: until FILE has a line matching PATTERN (or PID is gone).
wait_for() {
  local file=$1 pattern=$2 pid=$3 what=$4
  for _ in $(seq 1 1200); do
    if grep -q -- "$pattern" "$file" 2>/dev/null; then return 0; fi
    if ! kill -0 "$pid" 2>/dev/null; then
      echo "demo.sh: $what exited before it was ready; its log ($file):" >&2
      sed 's/^/    /' "$file" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "demo.sh: $what not ready after 120 s; its log ($file):" >&2
  sed 's/^/    /' "$file" >&2
  return 1
}

start_daemon() {  # start_daemon ELEMENT_BYTES
  local slot
  slot=$(block_bytes "$1")
  local flags=(--config "$ROOT/configs/demo.toml" --daemon.data_directory "$DATA/data"
    --daemon.socket_path "$SOCKET" --t1.slot_bytes "$slot" --t1.capacity_bytes $((slot * 1024)))
  if [[ $ON_GPU == 1 ]]; then flags+=(--t0.enabled true --t0.capacity_bytes $((slot * 2048))); fi
  say "starting kvtierd: T1 of 1024 slots of $slot bytes (one KV block each)$(
    [[ $ON_GPU == 1 ]] && echo ", T0 of 2048 slots on the GPU"); socket $SOCKET"
  "$KVTIERD" "${flags[@]}" >"$DATA/kvtierd.log" 2>&1 &
  DAEMON_PID=$!
  wait_for "$DATA/kvtierd.log" "kvtierd ready" "$DAEMON_PID" kvtierd
}

start_server() {  # start_server DEVICE
  say "starting kvtier serve --model $MODEL --device $1 --daemon $SOCKET"
  : >"$DATA/serve.log"
  "$KVTIER" serve --model "$MODEL" --device "$1" --port 0 --served-model-name demo \
    --daemon "$SOCKET" >"$DATA/serve.log" 2>&1 &
  SERVE_PID=$!
  wait_for "$DATA/serve.log" "serving .* on http://" "$SERVE_PID" "kvtier serve"
}

if [[ $ON_GPU == 1 ]]; then
  if ! { start_daemon 2 && start_server "$DEVICE"; }; then
    # kvtierd without its T0 pool, or a serve that cannot keep the GPU engine's KV in kvtierd.
    [[ $DEVICE == auto ]] || exit 1
    say "the GPU engine could not run on kvtierd (above): the CPU backend (fp32) runs the demo instead"
    stop "$SERVE_PID" "kvtier serve"
    stop "$DAEMON_PID" kvtierd
    SERVE_PID="" DAEMON_PID="" ON_GPU=0
    rm -rf "$DATA/data"
    choose_model
    start_daemon 4
    start_server cpu
  fi
else
  start_daemon 4
  start_server cpu
fi
grep -v '^info' "$DATA/serve.log" | grep -v 'serving .* on http://' | sed 's/^/   /' || true
LINE=$(grep -m1 'serving .* on http://' "$DATA/serve.log")
URL=$(grep -o 'http://[^ ]*' <<<"$LINE")
say "${LINE#kvtier serve: }"

# ---- 4. The same prompt twice. ----
say "sending the same $WORDS-word prompt twice (streamed completions, $MAX_TOKENS tokens each)"
python3 "$ROOT/tools/demo_client.py" --url "$URL" --model demo --prompt-words "$WORDS" \
  --max-tokens "$MAX_TOKENS"
if [[ $RANDOM_MODEL == 1 ]]; then say "(random weights: the text above is meaningless by design)"; fi

# ---- 5. Stop (the trap), or keep serving. ----
if [[ $KEEP_SERVING == 1 ]]; then
  say "serving on $URL (model name \"demo\"; metrics at $URL/metrics); Ctrl-C stops both"
  rc=0
  wait "$SERVE_PID" || rc=$?
  if [[ $rc -le 128 ]]; then  # it stopped by itself (not our trap interrupting the wait)
    said_stopped "kvtier serve" "$rc"
    SERVE_PID=""
  fi
fi
