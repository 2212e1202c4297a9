// One step of the batched forward pass: several sequences, each contributing a chunk of new tokens
// (a prefill chunk of n >= 1 tokens, or a decode of one) with its own block table, and the plan of
// that step — the flat, flashinfer-style arrays (q_indptr, kv_lens, block_tables) the attention
// operators read — made once on the host and shared by every layer. CpuModel and GpuModel both run
// a step from a ForwardPlan, so a batch means the same on either backend.
//
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "engine/model_config.h"
#include "kernels/ops/paged_kv.h"

namespace kvtier::engine {

// One sequence's part of a step. The spans are borrowed: they must outlive the forward call.
struct ChunkInput {
  std::span<const int32_t> tokens;       // [n >= 1] at positions start .. start + n - 1
  int64_t start = 0;                     // tokens of the sequence whose K/V is already in the pool
  std::span<const int32_t> block_table;  // [>= ceil((start + n) / block_tokens)] its slots
};

// The flattened step. Row r of every per-token array is token r of the batch: sequence b's tokens
// are rows q_indptr[b] .. q_indptr[b + 1] - 1.
struct ForwardPlan {
  int64_t batch = 0;
  int64_t total = 0;               // tokens in the step, q_indptr[batch]
  int64_t max_q_len = 0;           // the longest chunk
  int64_t max_kv_len = 0;          // the longest context (start + n)
  int64_t max_blocks = 0;          // the stride of block_tables: the most blocks any sequence uses
  std::vector<int32_t> ids;        // [total]
  std::vector<int32_t> positions;  // [total]
  std::vector<int64_t> token_slots;   // [total]  slot * block_tokens + row: where its K/V goes
  std::vector<int32_t> q_indptr;      // [batch + 1]
  std::vector<int32_t> kv_lens;       // [batch]  start + n
  std::vector<int32_t> block_tables;  // [batch, max_blocks]  unused entries are 0
  std::vector<int32_t> last_rows;     // [batch]  the row of each sequence's last token

  // Every chunk is a single token (a decode step: the decode attention kernel's case).
  bool decode_only() const { return total == batch; }
};

// InvalidArgument naming the first problem: an empty batch, a chunk without tokens, a token id
// outside the vocabulary, positions past max_position_embeddings, a block table too short or naming
// a slot outside [0, num_slots). Messages name the batch entry when the batch has more than one.
absl::Status CheckBatch(std::span<const ChunkInput> batch, const ModelConfig& config,
                        int64_t block_tokens, int32_t num_slots);

// The plan of a batch that passed CheckBatch.
ForwardPlan PlanForward(std::span<const ChunkInput> batch, int64_t block_tokens);

}  // namespace kvtier::engine
