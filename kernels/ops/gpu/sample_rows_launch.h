// Internal to kernels/ops/gpu: the launcher of sample_rows_kernel.cu (device-safe: no runtime or
// abseil headers), called by sample_rows_gpu.cc after it checked the arguments.
#pragma once

#include <cstdint>

namespace kvtier::ops::gpu_launch {

// The layout of ops::gpu::SampleRow (sample_rows.h), field for field.
struct SampleRowArgs {
  int32_t logit_row;
  int32_t top_k;
  float temperature;
  float top_p;
  uint64_t seed;
  uint64_t step;
};

// `blocks` thread blocks; workspace [blocks, vocab] 64-bit.
int SampleRows(const float* logits, int64_t vocab, const SampleRowArgs* rows, int64_t n, int blocks,
               uint64_t* workspace, int32_t* out, void* stream);

}  // namespace kvtier::ops::gpu_launch
