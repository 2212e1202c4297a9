#include "engine/gpu_sequence.h"

#include <algorithm>

#include "engine/gpu_sampler.h"

namespace kvtier::engine {

GpuSequence::~GpuSequence() {
  // Work enqueued for this sequence may still be writing its slots; whoever reuses them enqueues
  // on the same model stream, after it, so they can be returned at once.
  for (int32_t slot : block_table_) pool_.Free(slot);
}

absl::StatusOr<const float*> GpuSequence::Append(std::span<const int32_t> tokens, bool all_logits) {
  const int64_t chunk = model_.options().max_chunk_tokens;
  if (all_logits && static_cast<int64_t>(tokens.size()) > chunk) {
    return absl::InvalidArgumentError(
        "GpuSequence::Append: all_logits takes at most max_chunk_tokens tokens");
  }
  const int64_t end = static_cast<int64_t>(tokens_.size() + tokens.size());
  const int64_t bt = pool_.geometry().block_tokens;
  while (static_cast<int64_t>(block_table_.size()) * bt < end) {
    KVTIER_ASSIGN_OR_RETURN(int32_t slot, pool_.Allocate());
    block_table_.push_back(slot);
  }
  const float* logits = nullptr;
  for (size_t at = 0; at < tokens.size(); at += static_cast<size_t>(chunk)) {
    const std::span<const int32_t> piece =
        tokens.subspan(at, std::min(tokens.size() - at, static_cast<size_t>(chunk)));
    KVTIER_ASSIGN_OR_RETURN(logits, model_.Forward(piece, static_cast<int64_t>(tokens_.size()),
                                                   block_table_, pool_, all_logits));
    tokens_.insert(tokens_.end(), piece.begin(), piece.end());
  }
  return logits;
}

absl::StatusOr<std::vector<int32_t>> GenerateOnGpu(GpuModel& model, GpuKvPool& pool,
                                                   std::span<const int32_t> prompt,
                                                   const GenerateOptions& options,
                                                   const std::function<void(int32_t)>& on_token) {
  const std::vector<uint32_t>& eos = model.config().generation.eos_token_ids;
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<GpuSampler> sampler,
                          GpuSampler::Create(model.config().vocab_size));
  GpuSequence seq(model, pool);
  std::vector<int32_t> out;
  KVTIER_ASSIGN_OR_RETURN(const float* logits, seq.Append(prompt, /*all_logits=*/false));
  for (int32_t step = 0; step < options.max_tokens; ++step) {
    KVTIER_ASSIGN_OR_RETURN(
        const int32_t token,
        sampler->Choose(logits, options.sampling, static_cast<uint64_t>(step), model.stream()));
    out.push_back(token);
    if (on_token) on_token(token);
    const bool is_eos =
        std::find(eos.begin(), eos.end(), static_cast<uint32_t>(token)) != eos.end();
    if ((options.stop_at_eos && is_eos) || step + 1 == options.max_tokens) break;
    const int32_t next[1] = {token};
    KVTIER_ASSIGN_OR_RETURN(logits, seq.Append(next, /*all_logits=*/false));
  }
  return out;
}

}  // namespace kvtier::engine
