// One sequence on the GPU backend: its tokens, its block table in a GpuKvPool (slots allocated as
// the sequence grows, freed when it is destroyed), prefill in chunks of the model's
// max_chunk_tokens, and the greedy / sampled generation loop with the choice made on the GPU.
//
// Thread-safety: not thread-safe; one owner. The model and the pool must outlive the sequence.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/cpu_sequence.h"
#include "engine/gpu_kv_pool.h"
#include "engine/gpu_model.h"

namespace kvtier::engine {

class GpuSequence {
 public:
  GpuSequence(GpuModel& model, GpuKvPool& pool) : model_(model), pool_(pool) {}
  ~GpuSequence();
  GpuSequence(const GpuSequence&) = delete;
  GpuSequence& operator=(const GpuSequence&) = delete;

  // Runs `tokens` after those already in the sequence (a prompt, a chunk of one, or one decoded
  // token), allocating slots as needed, in calls of at most max_chunk_tokens. Returns the logits
  // (GpuModel::Forward's: float32 in device memory, valid until the model's next call) of the last
  // call: [n, vocab] when all_logits — then tokens.size() must be <= max_chunk_tokens — else
  // [vocab] of the last token. On error the sequence keeps the tokens of the calls that completed;
  // slots it allocated stay in its block table for reuse.
  absl::StatusOr<const float*> Append(std::span<const int32_t> tokens, bool all_logits);

  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<int32_t>& block_table() const { return block_table_; }

 private:
  GpuModel& model_;
  GpuKvPool& pool_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> block_table_;  // slot of block j
};

// As engine::Generate (cpu_sequence.h) on the GPU: prefills `prompt` (chunked), then decodes one
// token at a time until max_tokens or an eos token (included), each token chosen on the GPU
// (greedy: Argmax; sampling: the Sample kernel with draw counter = step, as ref::Sample on the
// CPU). `on_token` sees each token as it is chosen. Returns the new tokens.
absl::StatusOr<std::vector<int32_t>> GenerateOnGpu(
    GpuModel& model, GpuKvPool& pool, std::span<const int32_t> prompt,
    const GenerateOptions& options, const std::function<void(int32_t)>& on_token = {});

}  // namespace kvtier::engine
