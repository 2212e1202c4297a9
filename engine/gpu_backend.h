// The GPU backend of the engine loop: GpuModel's batched forward over a GpuKvPool it owns (a
// decode-only step replayed from a graph per batch-size and context bucket, gpu_model.h), and the
// GpuSampler's choice for every row of logits that needs a token in one launch (ChooseRows).
//
// Thread-safety: not thread-safe; one owner. The model must outlive the backend.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/gpu_kv_pool.h"
#include "engine/gpu_model.h"
#include "engine/gpu_sampler.h"
#include "engine/model_backend.h"

namespace kvtier::engine {

class GpuBackend : public ModelBackend {
 public:
  // A pool of num_slots slots of block_tokens tokens in the model's dtype. Errors: the pool's and
  // the sampler's (out of memory; FailedPrecondition without a GPU backend).
  static absl::StatusOr<std::unique_ptr<GpuBackend>> Create(GpuModel& model, int64_t block_tokens,
                                                            int32_t num_slots);
  // Over `pool` (GpuKvPool::View of the daemon's T0 with DaemonKvBlocks, say), whose geometry and
  // dtype must be the model's (InvalidArgument naming both when they are not).
  static absl::StatusOr<std::unique_ptr<GpuBackend>> Create(GpuModel& model,
                                                            std::unique_ptr<GpuKvPool> pool);

  const ModelConfig& config() const override { return model_.config(); }
  int64_t block_tokens() const override { return pool_->geometry().block_tokens; }
  int32_t num_slots() const override { return pool_->num_slots(); }
  std::string kv_dtype() const override { return ops::gpu::DTypeName(model_.dtype()); }
  int64_t max_step_tokens() const override { return model_.options().max_chunk_tokens; }

  absl::StatusOr<std::vector<int32_t>> Step(std::span<const ChunkInput> batch,
                                            std::span<const SampleSpec> samples) override;

 private:
  GpuBackend(GpuModel& model, std::unique_ptr<GpuKvPool> pool, std::unique_ptr<GpuSampler> sampler)
      : model_(model), pool_(std::move(pool)), sampler_(std::move(sampler)) {}

  GpuModel& model_;
  std::unique_ptr<GpuKvPool> pool_;
  std::unique_ptr<GpuSampler> sampler_;
};

}  // namespace kvtier::engine
