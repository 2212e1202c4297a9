// Internal to kernels/ops/gpu: the Hopper prefill kernel (attention_prefill_wgmma_kernel.cu), built
// in the CUDA variant only and compiled for sm_90a alone (kernels/ops/gpu/CMakeLists.txt).
// Device-safe: no runtime or abseil headers.
#pragma once

#include <cstdint>

#include "kernels/ops/gpu/launch.h"

namespace kvtier::ops::gpu_launch {

// AttentionPrefill on warpgroup matrix multiplies (wgmma) where the device is compute
// capability 9.0 (the only one sm_90a code runs on), head_dim is 128 and scale > 0. Else
// kNoMmaKernel, nothing launched; otherwise the vendor's code. The environment variable
// KVTIER_PREFILL_KERNEL (a switch for benchmarks and tests, read at each call) picks the kernel:
// "mma" declines (mma.sync then serves), "wgmma-sync" the kernel whose every thread loads and
// computes (attention_prefill_wgmma_kernel.cu), "ws" the warp-specialised kernel with a cp.async
// producer; unset or anything else, the warp-specialised kernel with a TMA producer
// (attention_prefill_wgmma_ws_kernel.cu).
int AttentionPrefillWgmma(bool bf16, const AttentionArgs& a, const int32_t* q_indptr,
                          int64_t max_q_len, void* stream);

// The warp-specialised kernel, launched unconditionally.
enum class WgmmaWsVariant {
  kTma,      // the producer copies whole pool blocks by TMA where the pool allows, else kCpAsync
  kCpAsync,  // the producer's threads copy 16-byte pieces by cp.async
};
int AttentionPrefillWgmmaWs(bool bf16, WgmmaWsVariant v, const AttentionArgs& a,
                            const int32_t* q_indptr, int64_t max_q_len, void* stream);

}  // namespace kvtier::ops::gpu_launch
