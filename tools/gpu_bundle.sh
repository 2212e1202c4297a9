#!/usr/bin/env bash
# Packs binaries of the cuda build with the shared libraries they load (from this machine's Debian
# packages) into one folder, for a GPU host that has the CUDA driver but not kvtier's Debian
# libraries. The host runs them with LD_LIBRARY_PATH set to the folder; the CUDA runtime
# (libcudart) travels in it too, so only the driver is needed there. cuBLAS(Lt) is the exception:
# over 500 MB, it stays behind, and binaries that use it (the engine's GEMM) find the GPU host's
# own toolkit copy: LD_LIBRARY_PATH=OUT_DIR:/usr/local/cuda/lib64.
#
#   tools/gpu_bundle.sh OUT_DIR BINARY...      e.g. tools/gpu_bundle.sh .devbin build/cuda/tests/kernels/*_test
set -euo pipefail
out=$1
shift
mkdir -p "$out"
for bin in "$@"; do
  cp -f "$bin" "$out/"
  # Every resolved library except the C runtime, the loader and the GPU driver (the host's own).
  ldd "$bin" | awk '/=> \//{print $3}' |
    grep -v -E '/(libc|libm|libpthread|libdl|librt|ld-linux[^/]*|libcuda|libnvidia[^/]*|libcublas[^/]*)\.so' |
    while read -r lib; do cp -fL "$lib" "$out/"; done
done
# Debug info is most of the size; the bundle is for running, so it goes.
chmod u+w "$out"/*
strip --strip-debug "$out"/* 2>/dev/null || true
echo "gpu_bundle: $(ls "$out" | wc -l) files, $(du -sh "$out" | cut -f1) in $out"
