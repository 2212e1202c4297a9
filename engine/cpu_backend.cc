#include "engine/cpu_backend.h"

#include <utility>

namespace kvtier::engine {

CpuBackend::CpuBackend(const CpuModel& model, int64_t block_tokens, int32_t num_slots)
    : model_(model), pool_(model.KvGeometry(block_tokens), num_slots) {}

CpuBackend::CpuBackend(const CpuModel& model, CpuKvPool pool)
    : model_(model), pool_(std::move(pool)) {}

absl::StatusOr<std::vector<int32_t>> CpuBackend::Step(std::span<const ChunkInput> batch,
                                                      std::span<const SampleSpec> samples) {
  KVTIER_RETURN_IF_ERROR(model_.Forward(batch, pool_, &logits_));
  const auto vocab = static_cast<int64_t>(model_.config().vocab_size);
  std::vector<int32_t> tokens(batch.size(), -1);
  for (size_t b = 0; b < batch.size(); ++b) {
    if (!samples[b].wanted) continue;
    tokens[b] =
        ops::ref::Sample(logits_.data() + b * vocab, vocab, samples[b].params, samples[b].step);
  }
  return tokens;
}

}  // namespace kvtier::engine
