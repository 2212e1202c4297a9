#include "engine/forward_batch.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace kvtier::engine {
namespace {

int64_t BlocksFor(int64_t tokens, int64_t block_tokens) {
  return (tokens + block_tokens - 1) / block_tokens;
}

absl::Status CheckChunk(const ChunkInput& c, const ModelConfig& config, int64_t block_tokens,
                        int32_t num_slots) {
  if (c.tokens.empty()) return absl::InvalidArgumentError("Forward: no tokens");
  for (size_t i = 0; i < c.tokens.size(); ++i) {
    if (c.tokens[i] < 0 || static_cast<uint32_t>(c.tokens[i]) >= config.vocab_size) {
      return absl::InvalidArgumentError(
          fmt::format("token {} at index {} is outside the vocabulary of {} ({} tokens)",
                      c.tokens[i], i, config.name, config.vocab_size));
    }
  }
  const int64_t end = c.start + static_cast<int64_t>(c.tokens.size());
  if (c.start < 0 || end > config.max_position_embeddings) {
    return absl::InvalidArgumentError(fmt::format(
        "positions {}..{} exceed the context of {} ({} tokens, max_position_embeddings)", c.start,
        end - 1, config.name, config.max_position_embeddings));
  }
  const int64_t blocks = BlocksFor(end, block_tokens);
  if (static_cast<int64_t>(c.block_table.size()) < blocks) {
    return absl::InvalidArgumentError(
        fmt::format("Forward: {} tokens need {} blocks; the block table has {}", end, blocks,
                    c.block_table.size()));
  }
  for (int64_t b = 0; b < blocks; ++b) {
    if (c.block_table[b] < 0 || c.block_table[b] >= num_slots) {
      return absl::InvalidArgumentError(fmt::format(
          "Forward: block table entry {} is slot {}, not in the pool", b, c.block_table[b]));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status CheckBatch(std::span<const ChunkInput> batch, const ModelConfig& config,
                        int64_t block_tokens, int32_t num_slots) {
  if (batch.empty()) return absl::InvalidArgumentError("Forward: an empty batch");
  for (size_t b = 0; b < batch.size(); ++b) {
    absl::Status status = CheckChunk(batch[b], config, block_tokens, num_slots);
    if (status.ok()) continue;
    if (batch.size() == 1) return status;
    return absl::InvalidArgumentError(
        fmt::format("batch entry {}: {}", b, std::string(status.message())));
  }
  return absl::OkStatus();
}

ForwardPlan PlanForward(std::span<const ChunkInput> batch, int64_t block_tokens) {
  ForwardPlan p;
  p.batch = static_cast<int64_t>(batch.size());
  p.q_indptr.push_back(0);
  for (const ChunkInput& c : batch) {
    const auto n = static_cast<int64_t>(c.tokens.size());
    p.total += n;
    p.max_q_len = std::max(p.max_q_len, n);
    p.max_kv_len = std::max(p.max_kv_len, c.start + n);
    p.max_blocks = std::max(p.max_blocks, BlocksFor(c.start + n, block_tokens));
    p.q_indptr.push_back(static_cast<int32_t>(p.total));
    p.kv_lens.push_back(static_cast<int32_t>(c.start + n));
    p.last_rows.push_back(static_cast<int32_t>(p.total - 1));
    p.ids.insert(p.ids.end(), c.tokens.begin(), c.tokens.end());
    for (int64_t pos = c.start; pos < c.start + n; ++pos) {
      p.positions.push_back(static_cast<int32_t>(pos));
      p.token_slots.push_back(int64_t{c.block_table[pos / block_tokens]} * block_tokens +
                              pos % block_tokens);
    }
  }
  p.block_tables.assign(p.batch * p.max_blocks, 0);
  for (int64_t b = 0; b < p.batch; ++b) {
    const int64_t used = BlocksFor(p.kv_lens[b], block_tokens);
    std::copy_n(batch[b].block_table.begin(), used, p.block_tables.begin() + b * p.max_blocks);
  }
  return p;
}

}  // namespace kvtier::engine
