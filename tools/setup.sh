#!/usr/bin/env bash
# Installs every dependency of kvtier from Debian 12 packages. Idempotent: packages already present
# are skipped by apt-get. This is the only file in the repository that names packages; docs/dependencies.md
# says why each one is here.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake ninja-build ccache pkg-config clang clang-format
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
  # tests and benchmarks
  googletest libgtest-dev libgmock-dev libbenchmark-dev
  # trace compression in tests
  gzip zstd
  # the Python client: its tests (python3), and `pip install -e client/python` without downloads
  python3 python3-pip python3-setuptools python3-wheel
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
echo "setup: done"
