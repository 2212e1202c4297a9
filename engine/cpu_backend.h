// The CPU backend of the engine loop: CpuModel's batched forward over a CpuKvPool it owns, and
// ops::ref::Sample on each row of logits that needs a token.
//
// Thread-safety: not thread-safe; one owner. The model must outlive the backend.
#pragma once

#include <cstdint>
#include <memory>

#include "engine/cpu_kv_pool.h"
#include "engine/cpu_model.h"
#include "engine/model_backend.h"

namespace kvtier::engine {

class CpuBackend : public ModelBackend {
 public:
  // A pool of num_slots slots of block_tokens tokens for `model`. Preconditions: both > 0.
  CpuBackend(const CpuModel& model, int64_t block_tokens, int32_t num_slots);
  // Over `pool` (e.g. a view of the daemon's T1: DaemonKvBlocks::CpuPool). Precondition: its
  // geometry is model.KvGeometry(its block_tokens).
  CpuBackend(const CpuModel& model, CpuKvPool pool);

  const ModelConfig& config() const override { return model_.config(); }
  int64_t block_tokens() const override { return pool_.geometry().block_tokens; }
  int32_t num_slots() const override { return pool_.num_slots(); }
  std::string kv_dtype() const override { return "fp32"; }
  int64_t max_step_tokens() const override { return INT64_MAX; }

  absl::StatusOr<std::vector<int32_t>> Step(std::span<const ChunkInput> batch,
                                            std::span<const SampleSpec> samples) override;

 private:
  const CpuModel& model_;
  CpuKvPool pool_;
  std::vector<float> logits_;  // [batch, vocab] of the last step
};

}  // namespace kvtier::engine
