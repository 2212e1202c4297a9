// Choosing the next token on the GPU from a row of logits in device memory, as ops::ref::Sample
// does on the CPU (kernels/ops/sampling.h): greedy by the Argmax kernel, else temperature, top-k
// and top-p with the seeded counter-based draw of step `step`. Only the chosen token id comes back
// to the host (4 bytes), through pinned memory.
//
// Thread-safety: not thread-safe; one owner, one stream at a time.
#pragma once

#include <cstdint>
#include <memory>

#include "common/status.h"
#include "kernels/gpu_runtime.h"
#include "kernels/ops/sampling.h"

namespace kvtier::engine {

class GpuSampler {
 public:
  // For rows of `vocab` logits.
  static absl::StatusOr<std::unique_ptr<GpuSampler>> Create(int64_t vocab);
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // Enqueues the choice from logits [vocab] (float32, device memory, ready on `stream`), waits for
  // it and returns the token id. Preconditions as ref::Sample's (temperature >= 0, top_k >= 0,
  // 0 < top_p <= 1).
  absl::StatusOr<int32_t> Choose(const float* logits, const ops::SamplingParams& params,
                                 uint64_t step, gpu::StreamHandle stream);

 private:
  GpuSampler(int64_t vocab, int32_t* device_token, int32_t* host_token, void* workspace,
             int64_t workspace_bytes);

  int64_t vocab_;
  int32_t* device_token_;  // [1] device memory
  int32_t* host_token_;    // [1] pinned
  void* workspace_;        // the sampling kernel's per-token scratch
  int64_t workspace_bytes_;
};

}  // namespace kvtier::engine
