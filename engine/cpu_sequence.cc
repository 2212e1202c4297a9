#include "engine/cpu_sequence.h"

#include <algorithm>

namespace kvtier::engine {

CpuSequence::~CpuSequence() {
  for (int32_t slot : block_table_) pool_.Free(slot);
}

absl::Status CpuSequence::Append(std::span<const int32_t> tokens, bool all_logits,
                                 std::vector<float>* logits) {
  const int64_t start = static_cast<int64_t>(tokens_.size());
  const int64_t end = start + static_cast<int64_t>(tokens.size());
  const int64_t bt = pool_.geometry().block_tokens;
  while (static_cast<int64_t>(block_table_.size()) * bt < end) {
    KVTIER_ASSIGN_OR_RETURN(int32_t slot, pool_.Allocate());
    block_table_.push_back(slot);
  }
  KVTIER_RETURN_IF_ERROR(model_.Forward(tokens, start, block_table_, pool_, all_logits, logits));
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int32_t>> Generate(const CpuModel& model, CpuKvPool& pool,
                                              std::span<const int32_t> prompt,
                                              const GenerateOptions& options,
                                              const std::function<void(int32_t)>& on_token) {
  const std::vector<uint32_t>& eos = model.config().generation.eos_token_ids;
  CpuSequence seq(model, pool);
  std::vector<float> logits;
  std::vector<int32_t> out;
  KVTIER_RETURN_IF_ERROR(seq.Append(prompt, /*all_logits=*/false, &logits));
  for (int32_t step = 0; step < options.max_tokens; ++step) {
    const int32_t token = ops::ref::Sample(logits.data(), static_cast<int64_t>(logits.size()),
                                           options.sampling, static_cast<uint64_t>(step));
    out.push_back(token);
    if (on_token) on_token(token);
    const bool is_eos =
        std::find(eos.begin(), eos.end(), static_cast<uint32_t>(token)) != eos.end();
    if ((options.stop_at_eos && is_eos) || step + 1 == options.max_tokens) break;
    const int32_t next[1] = {token};
    KVTIER_RETURN_IF_ERROR(seq.Append(next, /*all_logits=*/false, &logits));
  }
  return out;
}

}  // namespace kvtier::engine
