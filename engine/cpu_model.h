// The decoder forward pass on the CPU in fp32, built from the operator references
// (kernels/ops/*_ref): the CPU backend, and the model the GPU backend is checked against. It
// computes what transformers' LlamaForCausalLM / Qwen2 / Qwen3 / Mistral compute, layer by layer:
//   h = embed(tokens)
//   per layer: a = attention(rmsnorm(h)); h += a; m = mlp(rmsnorm(h)); h += m
//   logits = lm_head(rmsnorm(h))
// with attention reading and writing K/V in a paged pool in the daemon's payload layout.
//
// Thread-safety: Forward is const and allocates its own scratch: concurrent calls on different
// sequences (different pool slots) are safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"
#include "engine/cpu_kv_pool.h"
#include "engine/forward_batch.h"
#include "engine/model_config.h"
#include "engine/weights.h"
#include "kernels/ops/paged_kv.h"

namespace kvtier::engine {

class CpuModel {
 public:
  // Loads config.json (+ generation_config.json) and the safetensors in `dir`, converted to fp32.
  static absl::StatusOr<std::unique_ptr<CpuModel>> Load(const std::string& dir);

  CpuModel(ModelConfig config, HostWeights weights);

  const ModelConfig& config() const { return config_; }

  // The KV geometry of this model for pool slots of `block_tokens` tokens.
  ops::PagedKvGeometry KvGeometry(int64_t block_tokens) const;

  // Runs `tokens` at positions start .. start + n - 1 of one sequence. The K/V of its first
  // `start` tokens must be in `pool` (a cached prefix); this call writes the K/V of the n new ones.
  // block_table [>= ceil((start + n) / block_tokens)]: the sequence's slots, allocated by the
  //   caller, pool.geometry() == KvGeometry(block_tokens).
  // logits: resized to [n, vocab] when all_logits, else [1, vocab] (the last token's).
  // InvalidArgument for a token id >= vocab, an empty `tokens`, positions past
  // max_position_embeddings, or a block table too short for start + n tokens.
  absl::Status Forward(std::span<const int32_t> tokens, int64_t start,
                       std::span<const int32_t> block_table, CpuKvPool& pool, bool all_logits,
                       std::vector<float>* logits) const;

  // One step over several sequences at once (forward_batch.h): each entry's chunk is run as the
  // single-sequence Forward would run it, and gives the same numbers (every operator computes a
  // token's row independently of the others in the step). Entries must not share the slots they
  // write. logits: resized to [batch, vocab], row b the last token's of entry b.
  // InvalidArgument as CheckBatch says; nothing is written then.
  absl::Status Forward(std::span<const ChunkInput> batch, CpuKvPool& pool,
                       std::vector<float>* logits) const;

 private:
  struct Scratch;
  absl::Status CheckPool(const CpuKvPool& pool) const;
  // Runs the plan's tokens; logits [rows.size(), vocab] of the given rows of the step.
  void Run(const ForwardPlan& plan, CpuKvPool& pool, std::span<const int32_t> rows,
           std::vector<float>* logits) const;
  // h [n, hidden] (normalized input) -> h = attention output after o_proj.
  void Attention(int64_t layer, Scratch& s, const ForwardPlan& plan, CpuKvPool& pool) const;
  // h [n, hidden] (normalized input) -> h = MLP output.
  void Mlp(int64_t layer, Scratch& s) const;

  ModelConfig config_;
  HostWeights weights_;
  std::vector<float> inv_freq_;  // [head_dim / 2]
};

}  // namespace kvtier::engine
