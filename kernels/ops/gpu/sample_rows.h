// Choosing the next token of many rows of logits in one launch (the engine's batched step): each
// row greedy (as Argmax) or sampled with its own temperature, top-k, top-p, seed and draw counter
// (as Sample), with exactly the tokens those per-row operators choose (ops_gpu.h), so a batch gives
// the tokens its rows would give one at a time.
//
// Thread-safety: a function of its arguments; the workspace is the caller's.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "kernels/gpu_runtime.h"

namespace kvtier::ops::gpu {

using ::kvtier::gpu::StreamHandle;

// One row's choice, as the kernel reads it from device memory.
struct SampleRow {
  int32_t logit_row = 0;  // the row of logits [rows, vocab] to choose from
  int32_t top_k = 0;      // SamplingParams' fields; temperature <= 0: greedy (Argmax)
  float temperature = 0;
  float top_p = 1;
  uint64_t seed = 0;
  uint64_t step = 0;  // the draw counter
};

// Thread blocks of one launch at most: rows beyond it are taken in turn by the same blocks, each
// block reusing its slice of the workspace.
inline constexpr int64_t kSampleRowsMaxBlocks = 128;

// Device memory SampleRows needs for `rows` rows of `vocab` logits: one 64-bit mass per token for
// each thread block.
inline int64_t SampleRowsWorkspaceBytes(int64_t vocab, int64_t rows) {
  const int64_t blocks = rows < kSampleRowsMaxBlocks ? rows : kSampleRowsMaxBlocks;
  return blocks * vocab * 8;
}

// out[i] = the token row i chooses: rows[i].temperature <= 0 -> Argmax(logits[rows[i].logit_row]),
// else Sample(that row, params, rows[i].step). logits: float [*, vocab] in device memory; rows:
// [n] SampleRow in device memory (valid: temperature >= 0, top_k >= 0, 0 < top_p <= 1, logit_row
// inside logits: the kernel does not check); out: device int32 [n]. vocab <= 2^19. workspace:
// SampleRowsWorkspaceBytes(vocab, n), 16-byte aligned. InvalidArgument for bad sizes or pointers;
// FailedPrecondition in the CPU-only build.
absl::Status SampleRows(const float* logits, int64_t vocab, const SampleRow* rows, int64_t n,
                        void* workspace, int64_t workspace_bytes, int32_t* out,
                        StreamHandle stream);

}  // namespace kvtier::ops::gpu
