// One sequence on the CPU backend: its tokens, its block table in a CpuKvPool (slots allocated as
// the sequence grows, freed when it is destroyed), and the greedy / sampled generation loop.
//
// Thread-safety: not thread-safe; one owner. The model and the pool must outlive the sequence.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/cpu_kv_pool.h"
#include "engine/cpu_model.h"
#include "kernels/ops/sampling.h"

namespace kvtier::engine {

class CpuSequence {
 public:
  CpuSequence(const CpuModel& model, CpuKvPool& pool) : model_(model), pool_(pool) {}
  ~CpuSequence();
  CpuSequence(const CpuSequence&) = delete;
  CpuSequence& operator=(const CpuSequence&) = delete;

  // Runs `tokens` after those already in the sequence (the prompt, a chunk of it, or one decoded
  // token), allocating slots as needed. logits: [n, vocab] when all_logits, else [vocab] of the
  // last token. On error (a bad token, the context or the pool exhausted) the sequence is
  // unchanged, though slots it allocated stay in its block table for reuse.
  absl::Status Append(std::span<const int32_t> tokens, bool all_logits, std::vector<float>* logits);

  const std::vector<int32_t>& tokens() const { return tokens_; }
  const std::vector<int32_t>& block_table() const { return block_table_; }

 private:
  const CpuModel& model_;
  CpuKvPool& pool_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> block_table_;  // slot of block j
};

struct GenerateOptions {
  int32_t max_tokens = 32;       // new tokens at most
  ops::SamplingParams sampling;  // temperature 0: greedy
  bool stop_at_eos = true;       // stop after a token in the model's eos_token_ids
};

// Prefills `prompt` (at least one token) in one Forward, then decodes one token at a time until
// max_tokens or an eos token (included in the result). `on_token`, if set, sees each new token as
// it is chosen (streaming). Returns the new tokens.
absl::StatusOr<std::vector<int32_t>> Generate(const CpuModel& model, CpuKvPool& pool,
                                              std::span<const int32_t> prompt,
                                              const GenerateOptions& options,
                                              const std::function<void(int32_t)>& on_token = {});

}  // namespace kvtier::engine
