#include "engine/gpu_backend.h"

#include <fmt/format.h>

namespace kvtier::engine {

absl::StatusOr<std::unique_ptr<GpuBackend>> GpuBackend::Create(GpuModel& model,
                                                               int64_t block_tokens,
                                                               int32_t num_slots) {
  KVTIER_ASSIGN_OR_RETURN(
      std::unique_ptr<GpuKvPool> pool,
      GpuKvPool::Create(model.KvGeometry(block_tokens), num_slots, model.dtype()));
  return Create(model, std::move(pool));
}

absl::StatusOr<std::unique_ptr<GpuBackend>> GpuBackend::Create(GpuModel& model,
                                                               std::unique_ptr<GpuKvPool> pool) {
  const ops::PagedKvGeometry& got = pool->geometry();
  const ops::PagedKvGeometry want = model.KvGeometry(got.block_tokens);
  if (got.layers != want.layers || got.kv_heads != want.kv_heads || got.head_dim != want.head_dim ||
      pool->dtype() != model.dtype()) {
    return absl::InvalidArgumentError(fmt::format(
        "GpuBackend: the KV pool's slots are {} layers x {} KV heads x {} dims in {}; the model's "
        "are {} x {} x {} in {}",
        got.layers, got.kv_heads, got.head_dim, ops::gpu::DTypeName(pool->dtype()), want.layers,
        want.kv_heads, want.head_dim, ops::gpu::DTypeName(model.dtype())));
  }
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<GpuSampler> sampler,
                          GpuSampler::Create(model.config().vocab_size));
  return std::unique_ptr<GpuBackend>(new GpuBackend(model, std::move(pool), std::move(sampler)));
}

absl::StatusOr<std::vector<int32_t>> GpuBackend::Step(std::span<const ChunkInput> batch,
                                                      std::span<const SampleSpec> samples) {
  if (samples.size() != batch.size()) {
    return absl::InvalidArgumentError(fmt::format(
        "GpuBackend::Step: {} sample specs for a batch of {}", samples.size(), batch.size()));
  }
  KVTIER_ASSIGN_OR_RETURN(const float* logits, model_.Forward(batch, *pool_));
  // Every row's token in one launch, one copy back (GpuSampler::ChooseRows).
  return sampler_->ChooseRows(logits, samples, model_.stream());
}

}  // namespace kvtier::engine
