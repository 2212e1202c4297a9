// Choosing the next token on the GPU from rows of logits in device memory, as ops::ref::Sample
// does on the CPU (kernels/ops/sampling.h): greedy by argmax, else temperature, top-k and top-p
// with the seeded counter-based draw of step `step`. Only the chosen token ids come back to the
// host (4 bytes a row), through pinned memory. ChooseRows does a whole batch in one launch and one
// copy back (the engine's step); Choose does one row (a sequence generating alone).
//
// Thread-safety: not thread-safe; one owner, one stream at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/model_backend.h"
#include "kernels/gpu_runtime.h"
#include "kernels/ops/gpu/sample_rows.h"
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

  // One token for each rows[b].wanted, chosen from logits [rows.size(), vocab] (row b; float32,
  // device memory, ready on `stream`) with rows[b].params and draw counter rows[b].step; -1 where
  // not wanted. One launch (ops::gpu::SampleRows) and one copy back, then waits for them and for
  // everything enqueued on `stream` before (also when no row is wanted: a prefill chunk's KV
  // writes are done when it returns, so the engine may hash and publish them). The tokens are
  // those Choose gives row by row. Preconditions as Choose's, for every wanted row.
  absl::StatusOr<std::vector<int32_t>> ChooseRows(const float* logits,
                                                  std::span<const SampleSpec> rows,
                                                  gpu::StreamHandle stream);

 private:
  GpuSampler(int64_t vocab, int32_t* device_token, int32_t* host_token, void* workspace,
             int64_t workspace_bytes);

  int64_t vocab_;
  int32_t* device_token_;  // [1] device memory
  int32_t* host_token_;    // [1] pinned
  void* workspace_;        // the sampling kernel's per-token scratch
  int64_t workspace_bytes_;

  // ChooseRows' buffers, grown to the most rows asked for at once (rows_capacity_).
  absl::Status EnsureRows(int64_t rows);
  // Blocks until everything enqueued on `stream` so far is done.
  absl::Status WaitFor(gpu::StreamHandle stream);
  int64_t rows_capacity_ = 0;
  ops::gpu::SampleRow* host_rows_ = nullptr;  // [capacity] pinned: what is uploaded
  void* device_rows_ = nullptr;               // [capacity] SampleRow, then [capacity] int32 ids
  int32_t* host_ids_ = nullptr;               // [capacity] pinned: what comes back
  void* rows_workspace_ = nullptr;            // SampleRowsWorkspaceBytes(vocab, capacity)
  int64_t rows_workspace_bytes_ = 0;
};

}  // namespace kvtier::engine
