// Internal to kernels/ops/gpu: the Hopper prefill kernel (attention_prefill_wgmma_kernel.cu), built
// in the CUDA variant only and compiled for sm_90a alone (kernels/ops/gpu/CMakeLists.txt).
// Device-safe: no runtime or abseil headers.
#pragma once

#include <cstdint>

#include "kernels/ops/gpu/launch.h"

namespace kvtier::ops::gpu_launch {

// AttentionPrefill on warpgroup matrix multiplies (wgmma) where the device is compute
// capability 9.0 (the only one sm_90a code runs on), head_dim is 128, scale > 0, and the
// environment variable KVTIER_PREFILL_KERNEL is not "mma" (a switch for benchmarks and tests, read
// at each call). Else kNoMmaKernel, nothing launched; otherwise the vendor's code.
int AttentionPrefillWgmma(bool bf16, const AttentionArgs& a, const int32_t* q_indptr,
                          int64_t max_q_len, void* stream);

}  // namespace kvtier::ops::gpu_launch
